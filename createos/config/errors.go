package config

import (
	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/operator"
)

// The config's refusals, the reference's messages verbatim.
var (
	errNoAPIURL          = operator.New("CreateOS requires an API URL.")
	errAPIURL            = operator.New("CreateOS API URL is invalid.")
	errAPIURLShape       = operator.New("CreateOS API URL must be an HTTPS origin (optionally ending in /v1); HTTP is allowed on loopback only.")
	errNoShape           = operator.New("CreateOS requires a shape from its shape catalog.")
	errNoAPIKey          = operator.New("CreateOS requires an API key in the environment config or CREATEOS_API_KEY.")
	errCustomEndpointKey = operator.New("Custom CreateOS API endpoints require an explicit environment API key; the host fallback is only available for https://api.sb.createos.sh. Set API key to a key of the account that API URL serves.")
	errReuseLease        = operator.New("reuseLease must be a boolean.")
	errTimeoutRange      = operator.Errorf("timeoutMs must be an integer between 1 and %d.", MaxTimeoutMs)
	errRequestsPerMinute = operator.Errorf("requestsPerMinute must be an integer between %d and %d (the provider allows 300 a minute per caller; set less when other clients share this API key or address).", api.MinPerMinute, MaxRequestsPerMinute)
	errAutoPauseRange    = operator.Errorf("autoPauseAfterSeconds must be an integer between %d and %d.", MinAutoPauseSeconds, MaxAutoPauseSeconds)
	errRootfsMap         = operator.New("rootfsByAdapter must be an object of adapter names to root filesystems.")
	errRootfsEntries     = operator.New("rootfsByAdapter must contain non-empty adapter and root filesystem strings.")
	errEgressList        = operator.New("egressAllowlist must be an array of non-empty host or CIDR strings.")
	errNetworkEgress     = operator.New("networkEgress must be an object.")
	errGrantList         = operator.New("networkEgress allowlists must contain non-empty strings.")
)

// errNotText refuses a config field that must be a non-empty string.
func errNotText(key string) error { return operator.New(key + " must be a non-empty string.") }
