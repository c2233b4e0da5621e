// Package paperclip is the Paperclip server of make server-e2e: its
// install (npm, pinned per release), its process (test-drive, or onboard
// on a release without it, started again for a restart), and its client
// (the REST API and the paperclipai CLI).
package paperclip
