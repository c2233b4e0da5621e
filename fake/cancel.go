package fake

import (
	"context"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// CancelExecution implements handlers.ExecutionCanceller. It stops exactly
// the execution registered under (company, environment, lease,
// executionId) and answers cancelled:true only once that command will not
// run (a cancel that wins the race with the start) or its process group is
// gone. Unknown or finished ids answer cancelled:false and leave no state.
func (d *Driver) CancelExecution(ctx context.Context, p *handlers.CancelExecutionParams) (*handlers.CancelExecutionResult, error) {
	if err := validateExecutionID(p.ExecutionID); err != nil {
		return nil, err
	}
	key := executionKey{CompanyID: p.CompanyID, EnvironmentID: p.EnvironmentID, ProviderLeaseID: p.Lease.LeaseID(), ExecutionID: p.ExecutionID}
	e, ok := d.execs.Lookup(key)
	if !ok {
		return &handlers.CancelExecutionResult{ExecutionID: p.ExecutionID, Cancelled: false}, nil
	}
	reason := p.Reason
	if reason == "" {
		reason = "cancelled by the host"
	}
	e.stop(reason)
	select {
	case <-e.done:
	case <-ctx.Done():
		return &handlers.CancelExecutionResult{ExecutionID: p.ExecutionID, Cancelled: false}, nil
	}
	// done happens after the owner wrote stopped.
	return &handlers.CancelExecutionResult{ExecutionID: p.ExecutionID, Cancelled: e.stopped}, nil
}

// execKey is the registry key of executionID on lease l.
func execKey(b handlers.BaseParams, l *handlers.Lease, executionID string) executionKey {
	return executionKey{CompanyID: b.CompanyID, EnvironmentID: b.EnvironmentID, ProviderLeaseID: l.LeaseID(), ExecutionID: executionID}
}
