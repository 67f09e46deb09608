// Command mkimage writes picometer's OCI image archive (make image): FROM
// scratch, the two statically linked binaries and the default model.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/picometer/picometer/deploy"
)

func main() {
	var spec deploy.ImageSpec
	flag.StringVar(&spec.Daemon, "picometerd", "", "statically linked picometerd `binary`")
	flag.StringVar(&spec.Sidecar, "sidecar", "", "statically linked picometer-sidecar `binary`")
	flag.StringVar(&spec.Model, "model", "", "GGUF `file` installed as the default model, "+deploy.ImageModel+" (empty: none)")
	flag.StringVar(&spec.Ref, "ref", "ghcr.io/picometer/picometer:0.1.0", "image `reference` recorded in the archive")
	out := flag.String("o", "build/picometer.oci.tar", "output `file` (an OCI image layout in a tar)")
	flag.Parse()
	if spec.Daemon == "" || spec.Sidecar == "" {
		fmt.Fprintln(os.Stderr, "mkimage: -picometerd and -sidecar are required")
		os.Exit(2)
	}
	img, err := deploy.Image(spec)
	if err == nil {
		err = deploy.WriteOCIArchive(*out, img, spec.Ref)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
	d, _ := img.Digest()
	fmt.Printf("%s: %s %s\n", *out, spec.Ref, d)
}
