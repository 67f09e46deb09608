//go:build cgo

package native

// Compiler and linker flags for every C file in this package. Kernels that
// need AVX2/FMA select them per function (target attributes) and are chosen
// at run time, so the library runs on any x86-64 and elsewhere.

/*
#cgo CFLAGS: -std=c11 -O2 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE
#cgo LDFLAGS: -lm -lpthread
*/
import "C"
