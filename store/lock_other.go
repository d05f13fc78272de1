//go:build !unix

package store

// lockDir does nothing where flock is missing: Badger's own directory lock
// still refuses a second process, with Badger's wording.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }
