package handlers

// Wire types of the environment* methods, as in
// @paperclipai/plugin-sdk@2026.916.1 dist/protocol.d.ts. Unknown fields are
// tolerated on input. Optional-or-null inputs are pointers.

// Object is a JSON object.
type Object = map[string]any

// BaseParams are the fields every environment call but validateConfig has.
type BaseParams struct {
	DriverKey     string  `json:"driverKey"`
	CompanyID     string  `json:"companyId"`
	EnvironmentID string  `json:"environmentId"`
	IssueID       *string `json:"issueId,omitempty"`
	Config        Object  `json:"config"`
}

// ValidateConfigParams: environmentValidateConfig.
type ValidateConfigParams struct {
	DriverKey string `json:"driverKey"`
	Config    Object `json:"config"`
}

// ValidationResult: environmentValidateConfig's result.
type ValidationResult struct {
	OK               bool     `json:"ok"`
	Warnings         []string `json:"warnings,omitempty"`
	Errors           []string `json:"errors,omitempty"`
	NormalizedConfig Object   `json:"normalizedConfig,omitempty"`
}

// Diagnostic is one probe finding.
type Diagnostic struct {
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Code     string `json:"code,omitempty"`
	Details  Object `json:"details,omitempty"`
}

// ProbeParams: environmentProbe.
type ProbeParams struct {
	BaseParams
}

// ProbeResult: environmentProbe's result.
type ProbeResult struct {
	OK          bool         `json:"ok"`
	Summary     string       `json:"summary,omitempty"`
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	Metadata    Object       `json:"metadata,omitempty"`
}

// Lease is PluginEnvironmentLease.
type Lease struct {
	ProviderLeaseID *string `json:"providerLeaseId"`
	Metadata        Object  `json:"metadata,omitempty"`
	ExpiresAt       *string `json:"expiresAt,omitempty"`
}

// LeaseID returns the provider lease id or "".
func (l *Lease) LeaseID() string {
	if l == nil || l.ProviderLeaseID == nil {
		return ""
	}
	return *l.ProviderLeaseID
}

// AcquireLeaseParams: environmentAcquireLease.
type AcquireLeaseParams struct {
	BaseParams
	RunID                      string  `json:"runId"`
	WorkspaceMode              string  `json:"workspaceMode,omitempty"`
	RequestedCwd               string  `json:"requestedCwd,omitempty"`
	AgentID                    string  `json:"agentId,omitempty"`
	ExecutionWorkspaceID       *string `json:"executionWorkspaceId,omitempty"`
	AdapterType                string  `json:"adapterType,omitempty"`
	ExecutionWorkspaceSettings Object  `json:"executionWorkspaceSettings,omitempty"`
	RequestedExpiresAt         *string `json:"requestedExpiresAt,omitempty"`
}

// ResumeLeaseParams: environmentResumeLease.
type ResumeLeaseParams struct {
	BaseParams
	ProviderLeaseID string `json:"providerLeaseId"`
	LeaseMetadata   Object `json:"leaseMetadata,omitempty"`
}

// ReleaseLeaseParams: environmentReleaseLease and environmentDestroyLease.
type ReleaseLeaseParams struct {
	BaseParams
	CancelActiveWork bool    `json:"cancelActiveWork,omitempty"`
	ProviderLeaseID  *string `json:"providerLeaseId"`
	LeaseMetadata    Object  `json:"leaseMetadata,omitempty"`
}

// DestroyLeaseParams: environmentDestroyLease.
type DestroyLeaseParams = ReleaseLeaseParams

// TerminationReceipt confirms that a lease's execution ended.
type TerminationReceipt struct {
	ProviderLeaseID string `json:"providerLeaseId"`
	State           string `json:"state"`
}

// Workspace is the workspace part of environmentRealizeWorkspace.
type Workspace struct {
	LocalPath  string `json:"localPath,omitempty"`
	RemotePath string `json:"remotePath,omitempty"`
	Mode       string `json:"mode,omitempty"`
	Metadata   Object `json:"metadata,omitempty"`
}

// RealizeWorkspaceParams: environmentRealizeWorkspace.
type RealizeWorkspaceParams struct {
	BaseParams
	Lease     Lease     `json:"lease"`
	Workspace Workspace `json:"workspace"`
}

// RealizeWorkspaceResult: environmentRealizeWorkspace's result.
type RealizeWorkspaceResult struct {
	Cwd      string `json:"cwd"`
	Metadata Object `json:"metadata,omitempty"`
}

// ExecuteParams: environmentExecute.
type ExecuteParams struct {
	BaseParams
	Lease         Lease             `json:"lease"`
	Command       string            `json:"command"`
	Args          []string          `json:"args,omitempty"`
	Cwd           string            `json:"cwd,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Stdin         *string           `json:"stdin,omitempty"`
	TimeoutMs     *float64          `json:"timeoutMs,omitempty"`
	BypassSession bool              `json:"bypassSession,omitempty"`
	// ExecutionID is the fork-lineage id for exact cancellation.
	ExecutionID *string `json:"executionId,omitempty"`
}

// ExecuteResult: environmentExecute's result.
type ExecuteResult struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
	TimedOut bool    `json:"timedOut"`
	Stdout   string  `json:"stdout"`
	Stderr   string  `json:"stderr"`
	Metadata Object  `json:"metadata,omitempty"`
}

// CancelExecutionParams: environmentCancelExecution (fork-lineage).
type CancelExecutionParams struct {
	BaseParams
	Lease       Lease  `json:"lease"`
	ExecutionID string `json:"executionId"`
	Reason      string `json:"reason,omitempty"`
}

// CancelExecutionResult: environmentCancelExecution's result.
type CancelExecutionResult struct {
	ExecutionID string `json:"executionId"`
	Cancelled   bool   `json:"cancelled"`
}

// SyncFileMapping is PluginSyncFileMapping.
type SyncFileMapping struct {
	SourcePath     string   `json:"sourcePath"`
	TargetPath     string   `json:"targetPath"`
	Kind           string   `json:"kind"`
	Mode           *uint32  `json:"mode,omitempty"`
	Exclude        []string `json:"exclude,omitempty"`
	FollowSymlinks bool     `json:"followSymlinks,omitempty"`
	Access         string   `json:"access,omitempty"`
	WritablePath   string   `json:"writablePath,omitempty"`
}

// PostUploadCommand is PluginPostUploadCommand.
type PostUploadCommand struct {
	Command   string   `json:"command"`
	Cwd       string   `json:"cwd,omitempty"`
	TimeoutMs *float64 `json:"timeoutMs,omitempty"`
}

// SyncOperation is PluginSyncOperation.
type SyncOperation struct {
	OperationID        string              `json:"operationId"`
	Files              []SyncFileMapping   `json:"files"`
	PostUploadCommands []PostUploadCommand `json:"postUploadCommands,omitempty"`
}

// SyncParams: environmentSyncIn and environmentSyncOut.
type SyncParams struct {
	BaseParams
	Lease      Lease           `json:"lease"`
	Operations []SyncOperation `json:"operations"`
}

// SyncOperationResult is one operation's transfer count.
type SyncOperationResult struct {
	OperationID      string `json:"operationId"`
	FilesTransferred int64  `json:"filesTransferred"`
	BytesTransferred int64  `json:"bytesTransferred"`
}

// SyncResult: environmentSyncIn/Out's result.
type SyncResult struct {
	Operations []SyncOperationResult `json:"operations"`
}

// ConnectionSummary is the redacted view of an interactive-setup connection.
type ConnectionSummary struct {
	Type            string  `json:"type"`
	Username        *string `json:"username,omitempty"`
	HostRedacted    bool    `json:"hostRedacted"`
	PortRedacted    bool    `json:"portRedacted"`
	CommandRedacted *bool   `json:"commandRedacted,omitempty"`
	ExpiresAt       *string `json:"expiresAt,omitempty"`
	Metadata        Object  `json:"metadata,omitempty"`
}

// ConnectionPayload is what a user connects with.
type ConnectionPayload struct {
	Type      string  `json:"type"`
	Command   *string `json:"command,omitempty"`
	Token     *string `json:"token,omitempty"`
	ExpiresAt *string `json:"expiresAt"`
	Metadata  Object  `json:"metadata,omitempty"`
}

// SetupSession is PluginEnvironmentInteractiveSetupSession.
type SetupSession struct {
	ProviderLeaseID   *string            `json:"providerLeaseId"`
	Status            string             `json:"status"`
	ConnectionSummary *ConnectionSummary `json:"connectionSummary"`
	ConnectionPayload *ConnectionPayload `json:"connectionPayload"`
	// ExpiresAt is omitted when nil; a typed nil *string is sent as null.
	ExpiresAt any    `json:"expiresAt,omitempty"`
	Metadata  Object `json:"metadata,omitempty"`
}

// StartSetupParams: environmentStartInteractiveSetup.
type StartSetupParams struct {
	BaseParams
	SessionID                  string   `json:"sessionId"`
	SourceTemplateRef          *string  `json:"sourceTemplateRef,omitempty"`
	SourceTemplateKind         *string  `json:"sourceTemplateKind,omitempty"`
	ConnectionExpiresInMinutes *float64 `json:"connectionExpiresInMinutes,omitempty"`
	ExpiresAt                  *string  `json:"expiresAt,omitempty"`
}

// GetSetupParams: environmentGetInteractiveSetup.
type GetSetupParams struct {
	BaseParams
	ProviderLeaseID            *string  `json:"providerLeaseId"`
	SetupMetadata              Object   `json:"setupMetadata,omitempty"`
	IncludeConnectionPayload   bool     `json:"includeConnectionPayload,omitempty"`
	ConnectionExpiresInMinutes *float64 `json:"connectionExpiresInMinutes,omitempty"`
}

// CaptureTemplateParams: environmentCaptureTemplate.
type CaptureTemplateParams struct {
	BaseParams
	ProviderLeaseID     *string  `json:"providerLeaseId"`
	SetupMetadata       Object   `json:"setupMetadata,omitempty"`
	SourceTemplateRef   *string  `json:"sourceTemplateRef,omitempty"`
	PreviousTemplateRef *string  `json:"previousTemplateRef,omitempty"`
	TemplateLabel       *string  `json:"templateLabel,omitempty"`
	TimeoutMs           *float64 `json:"timeoutMs,omitempty"`
}

// CaptureTemplateResult: environmentCaptureTemplate's result.
type CaptureTemplateResult struct {
	TemplateRef  string `json:"templateRef"`
	TemplateKind string `json:"templateKind"`
	Metadata     Object `json:"metadata,omitempty"`
}

// CancelSetupParams: environmentCancelInteractiveSetup.
type CancelSetupParams struct {
	BaseParams
	ProviderLeaseID *string `json:"providerLeaseId"`
	SetupMetadata   Object  `json:"setupMetadata,omitempty"`
	Reason          *string `json:"reason,omitempty"`
}

// CancelSetupResult: environmentCancelInteractiveSetup's result.
type CancelSetupResult struct {
	Status   string `json:"status"`
	Metadata Object `json:"metadata,omitempty"`
}

// DeleteTemplateParams: environmentDeleteTemplate.
type DeleteTemplateParams struct {
	BaseParams
	TemplateRef  string  `json:"templateRef"`
	TemplateKind *string `json:"templateKind,omitempty"`
	Metadata     Object  `json:"metadata,omitempty"`
	Reason       *string `json:"reason,omitempty"`
}

// DeleteTemplateResult: environmentDeleteTemplate's result.
type DeleteTemplateResult struct {
	Deleted  bool   `json:"deleted"`
	Metadata Object `json:"metadata,omitempty"`
}
