// Package config is what picometerd and picometer-sidecar share about their
// configuration, so the two read, check and print it the same way:
//
//   - [Decode]/[Load]: a TOML document over the defaults, decoded strictly (a
//     key the struct lacks is an error naming it), with one error text for
//     syntax, type and unknown-key errors, prefixed by the file's path;
//   - durations are [time.Duration] fields written as TOML strings ("90s",
//     "5m"); a bare integer is an error, not nanoseconds;
//   - [CheckListen]: one rule for every listen address;
//   - [Overrides]: a flag overrides its key only when given on the command
//     line, so the defaults a flag shows are the built-in ones;
//   - [Encode]: --check-config prints the effective configuration as TOML
//     through the BurntSushi encoder, so what it prints reads back;
//   - [Exit]: any configuration error ends the program with [ExitCode] 2.
//
// config_test.go covers it; each binary's config_test.go checks its own
// keys against testdata/config/<binary>/ with exact error strings.
package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// ExitCode is the exit status of a program whose configuration is invalid.
const ExitCode = 2

// Decode decodes the TOML document data into v, a pointer to a struct
// already holding the defaults. Errors, one text for both binaries:
//
//	line 2 (last key "listen"): expected value but found '\n' instead
//	line 2 (last key "listen"): incompatible types: TOML value has type int64; destination has type string
//	unknown key "engine.bmax"
//	request_timeout: 300 is not a duration; write a string such as "300s"
func Decode(data []byte, v any) error {
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(v)
	if err != nil {
		var pe toml.ParseError
		switch {
		case errors.As(err, &pe) && pe.LastKey != "":
			return fmt.Errorf("line %d (last key %q): %s", pe.Position.Line, pe.LastKey, pe.Message)
		case errors.As(err, &pe):
			return fmt.Errorf("line %d: %s", pe.Position.Line, pe.Message)
		}
		return errors.New(strings.TrimPrefix(err.Error(), "toml: "))
	}
	if und := md.Undecoded(); len(und) > 0 {
		return fmt.Errorf("unknown key %q", und[0].String())
	}
	for _, key := range md.Keys() {
		if md.Type(key...) != "Integer" {
			continue
		}
		if f, ok := fieldType(reflect.TypeOf(v), key); ok && f == reflect.TypeOf(time.Duration(0)) {
			n := reflect.ValueOf(v).Elem()
			for _, k := range key {
				n = fieldByKey(n, k)
			}
			return fmt.Errorf("%s: %d is not a duration; write a string such as \"%ds\"", key.String(), int64(n.Int()), n.Int())
		}
	}
	return nil
}

// Load reads the file at path and decodes it into v like [Decode]; every
// error starts with the path.
func Load(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := Decode(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// fieldType returns the type of the struct field that the TOML key path
// names in t (a struct or a pointer to one).
func fieldType(t reflect.Type, key toml.Key) (reflect.Type, bool) {
	for _, k := range key {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil, false
		}
		f, ok := fieldOf(t, k)
		if !ok {
			return nil, false
		}
		t = f.Type
	}
	return t, true
}

func fieldOf(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == key || (name == "" && strings.EqualFold(f.Name, key)) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func fieldByKey(v reflect.Value, key string) reflect.Value {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	f, _ := fieldOf(v.Type(), key)
	return v.FieldByIndex(f.Index)
}

// CheckListen checks a listen address for the key named key: host:port
// with a numeric port in 0..65535 and a host that is an IP address,
// "localhost" or empty (every interface, when asked for explicitly). A
// host name is refused: what it resolves to is not what the operator reads.
func CheckListen(key, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return fmt.Errorf("%s: %q is not host:port: %s", key, addr, ae.Err)
		}
		return fmt.Errorf("%s: %q is not host:port: %v", key, addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%s: port %q is not a number in 0..65535", key, port)
	}
	if host != "" && net.ParseIP(host) == nil && host != "localhost" {
		return fmt.Errorf("%s: host %q is not an IP address or localhost", key, host)
	}
	return nil
}

// Overrides calls apply[name] for every flag of fs given on the command
// line, in the order of fs.Visit (lexical), and only for those: a flag left
// out never overrides the file. Call it after fs.Parse.
func Overrides(fs *flag.FlagSet, apply map[string]func()) {
	fs.Visit(func(f *flag.Flag) {
		if a, ok := apply[f.Name]; ok {
			a()
		}
	})
}

// Encode writes v as a TOML document through the BurntSushi encoder:
// durations as strings, every key of the struct, tables after keys. What
// it writes, decoded over the defaults, gives v back.
func Encode(w io.Writer, v any) error {
	return toml.NewEncoder(w).Encode(v)
}

// Exit prints "prog: config: err" to stderr and exits with [ExitCode].
func Exit(prog string, err error) {
	fmt.Fprintf(os.Stderr, "%s: config: %v\n", prog, err)
	os.Exit(ExitCode)
}
