// Package e2e holds end-to-end tests that drive the built sandbox-plugin
// binary over stdio: fixture scripts under testdata/ with golden replies.
package e2e
