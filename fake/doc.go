// Package fake is the fake-plugin driver: a real local sandbox whose leases
// are private temp directories and whose commands run as local process
// groups with streamed output, timeouts and exact cancellation. It matches
// the observable formats of Paperclip's TypeScript fake sandbox provider.
package fake
