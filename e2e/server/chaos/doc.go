// Package chaos is make chaos: a scenario per fault and driver (named
// chaos/<driver>/<fault>) on the shared set-up with its fault tools, and
// the end-of-table checks (the host's cleanup, what each row left).
package chaos
