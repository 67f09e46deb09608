// Package docs holds no code: it is where the test that holds the packages
// to docs/ARCHITECTURE.md's package map lives (architecture_test.go).
package docs
