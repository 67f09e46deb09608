//go:build !cgo

package main

import "errors"

// bandwidth needs cgo (the probe's loads are C); without it -mode bw fails.
func bandwidth(threads, passes int, huge bool) (float64, error) {
	return 0, errors.New("-mode bw: built without cgo")
}
