package handlers

import "context"

// Driver is what every environment driver serves: the minimum environment
// method set of a Paperclip sandbox provider. Optional capabilities are the
// small interfaces below; supportedMethods follows from which a driver
// implements.
type Driver interface {
	// Key is the driverKey the host routes by.
	Key() string
	// Declaration is the driver's manifest entry.
	Declaration() DriverDeclaration
	ValidateConfig(ctx context.Context, p *ValidateConfigParams) (*ValidationResult, error)
	Probe(ctx context.Context, p *ProbeParams) (*ProbeResult, error)
	AcquireLease(ctx context.Context, p *AcquireLeaseParams) (*Lease, error)
	// ReleaseLease and DestroyLease return a receipt only once the driver
	// has confirmed that the lease's execution ended, else nil.
	ReleaseLease(ctx context.Context, p *ReleaseLeaseParams) (*TerminationReceipt, error)
	DestroyLease(ctx context.Context, p *DestroyLeaseParams) (*TerminationReceipt, error)
	RealizeWorkspace(ctx context.Context, p *RealizeWorkspaceParams) (*RealizeWorkspaceResult, error)
	Execute(ctx context.Context, p *ExecuteParams, out OutputSink) (*ExecuteResult, error)
	// Close stops everything the driver runs and removes what it does not
	// keep; the worker calls it on shutdown, SIGTERM and stdin EOF.
	Close(ctx context.Context) error
}

// OutputSink receives a command's output while it runs ("stdout" or
// "stderr"). Writes after the execute call returned are dropped.
type OutputSink interface {
	Write(stream string, p []byte)
}

// Starter is implemented by drivers with work to do once the host has
// initialized the worker (the setup hook of Paperclip's TypeScript
// plugins: a "ready" log).
type Starter interface {
	Start(ctx context.Context)
}

// LeaseResumer serves environmentResumeLease.
type LeaseResumer interface {
	ResumeLease(ctx context.Context, p *ResumeLeaseParams) (*Lease, error)
}

// LeaseAuthorizer is implemented by a driver that can say, without side
// effects, whether it will refuse a lease call (release, resume, destroy)
// for its caller. The plugin asks it before it acts for the call — before
// it ends the lease's live sessions — and a refusal is the call's answer:
// the driver's method is not called, and nothing changed.
type LeaseAuthorizer interface {
	// AuthorizeLease returns the error the driver's own method would
	// refuse c with because the lease is not the caller's (the same
	// operator text), or the environment the lease is the caller's in:
	// c.EnvironmentID, or for the host's orphan destroy (environmentId "")
	// the environment the driver knows the lease by. A lease the driver
	// does not know is not refused here: its method answers for it.
	AuthorizeLease(ctx context.Context, c *LeaseCall) (environmentID string, err error)
}

// LeaseAction is what a LeaseCall does to its lease.
type LeaseAction int

// The lease calls a LeaseAuthorizer is asked about.
const (
	LeaseRelease LeaseAction = iota // environmentReleaseLease
	LeaseResume                     // environmentResumeLease
	LeaseDestroy                    // environmentDestroyLease, also the orphan form
)

// LeaseCall is a lease call's params as its driver checks its caller: the
// company, environment and config, the lease id and the lease metadata the
// host persisted.
type LeaseCall struct {
	Action          LeaseAction
	Base            BaseParams
	ProviderLeaseID string
	LeaseMetadata   Object
}

// FileSyncer serves environmentSyncIn and environmentSyncOut, which the host
// uses only together.
type FileSyncer interface {
	SyncIn(ctx context.Context, p *SyncParams) (*SyncResult, error)
	SyncOut(ctx context.Context, p *SyncParams) (*SyncResult, error)
}

// InteractiveSetup serves the start/get/cancel interactive-setup methods.
type InteractiveSetup interface {
	StartInteractiveSetup(ctx context.Context, p *StartSetupParams) (*SetupSession, error)
	GetInteractiveSetup(ctx context.Context, p *GetSetupParams) (*SetupSession, error)
	CancelInteractiveSetup(ctx context.Context, p *CancelSetupParams) (*CancelSetupResult, error)
}

// TemplateCapturer serves environmentCaptureTemplate.
type TemplateCapturer interface {
	CaptureTemplate(ctx context.Context, p *CaptureTemplateParams) (*CaptureTemplateResult, error)
}

// TemplateDeleter serves environmentDeleteTemplate.
type TemplateDeleter interface {
	DeleteTemplate(ctx context.Context, p *DeleteTemplateParams) (*DeleteTemplateResult, error)
}

// ExecutionCanceller serves environmentCancelExecution, the fork-lineage
// exact-cancellation extension.
type ExecutionCanceller interface {
	CancelExecution(ctx context.Context, p *CancelExecutionParams) (*CancelExecutionResult, error)
}

// DriverDeclaration is PluginEnvironmentDriverDeclaration.
type DriverDeclaration struct {
	DriverKey                       string                 `json:"driverKey"`
	Kind                            string                 `json:"kind"`
	DisplayName                     string                 `json:"displayName"`
	Description                     string                 `json:"description,omitempty"`
	SupportsReusableLeases          *bool                  `json:"supportsReusableLeases,omitempty"`
	SupportsInteractiveSetup        bool                   `json:"supportsInteractiveSetup,omitempty"`
	InteractiveSetupConnectionTypes []string               `json:"interactiveSetupConnectionTypes,omitempty"`
	SupportsTemplateCapture         bool                   `json:"supportsTemplateCapture,omitempty"`
	TemplateRefKind                 string                 `json:"templateRefKind,omitempty"`
	TemplateConfigBinding           *TemplateConfigBinding `json:"templateConfigBinding,omitempty"`
	TemplateIdentityPaths           []string               `json:"templateIdentityPaths,omitempty"`
	SupportsTemplateDelete          bool                   `json:"supportsTemplateDelete,omitempty"`
	ConfigSchema                    Object                 `json:"configSchema"`
	SandboxCapabilities             map[string]bool        `json:"sandboxCapabilities,omitempty"`
	// SupportsLoginPty is set by the plugin for a sessions.LoginPtyOpener.
	SupportsLoginPty bool `json:"supportsLoginPty,omitempty"`
}

// TemplateConfigBinding names the config field a captured template binds to.
type TemplateConfigBinding struct {
	Field       string   `json:"field"`
	UnsetFields []string `json:"unsetFields,omitempty"`
}
