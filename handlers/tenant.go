package handlers

import "github.com/paperclip-sandbox/sandbox-plugin/internal/tenant"

// A call's tenant — its company and provider lease — rides in its context
// (internal/tenant) so that a driver's shared request scheduler can be fair across
// companies and leases. Each params type names its lease where it has one;
// the rest are the company's alone.

// tenanted is implemented by every environment call's params.
type tenanted interface{ tenant() tenant.Tenant }

func (p *BaseParams) tenant() tenant.Tenant { return tenant.Tenant{Company: p.CompanyID} }

func (p *BaseParams) withLease(id string) tenant.Tenant {
	return tenant.Tenant{Company: p.CompanyID, Lease: id}
}

func (p *ResumeLeaseParams) tenant() tenant.Tenant  { return p.withLease(p.ProviderLeaseID) }
func (p *ReleaseLeaseParams) tenant() tenant.Tenant { return p.withLease(deref(p.ProviderLeaseID)) }
func (p *RealizeWorkspaceParams) tenant() tenant.Tenant {
	return p.withLease(p.Lease.LeaseID())
}
func (p *ExecuteParams) tenant() tenant.Tenant         { return p.withLease(p.Lease.LeaseID()) }
func (p *CancelExecutionParams) tenant() tenant.Tenant { return p.withLease(p.Lease.LeaseID()) }
func (p *SyncParams) tenant() tenant.Tenant            { return p.withLease(p.Lease.LeaseID()) }
func (p *GetSetupParams) tenant() tenant.Tenant        { return p.withLease(deref(p.ProviderLeaseID)) }
func (p *CaptureTemplateParams) tenant() tenant.Tenant { return p.withLease(deref(p.ProviderLeaseID)) }
func (p *CancelSetupParams) tenant() tenant.Tenant     { return p.withLease(deref(p.ProviderLeaseID)) }
