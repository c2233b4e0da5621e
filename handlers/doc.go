// Package handlers is the plugin surface: the Paperclip lifecycle methods,
// the wire types of every environment* method, the driver interfaces, and
// the table that routes a call by driverKey to the driver that serves it.
// The live-session methods it hands to the route table (package sessions).
package handlers
