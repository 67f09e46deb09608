//go:build !unix

package daemon

import "os"

func mmapFile(*os.File, int64) ([]byte, func(), bool) { return nil, nil, false }
