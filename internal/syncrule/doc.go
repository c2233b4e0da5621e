// Package syncrule holds the rules of native file sync that every driver
// shares: what a file mapping must be before anything is transferred, and
// what a directory mapping's exclude list means (the host's own reading).
package syncrule
