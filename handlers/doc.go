// Package handlers is the plugin surface: the Paperclip lifecycle methods,
// the wire types of every environment* method, the driver interfaces, and
// the table that routes a call by driverKey to the driver that serves it.
package handlers
