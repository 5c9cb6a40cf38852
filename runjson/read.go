package runjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"

	"github.com/snapctl/snapctl/internal/fsutil"
)

// SchemaV1 is run.json's schema before the stacks moved into a table: its
// diff sites and suspects hold their stacks inline. Read reads it as well
// as Schema.
const SchemaV1 = "snapctl.run/v1"

// MaxSize bounds the run.json Read reads: a run of 100,000 stops writes a
// few tens of megabytes.
const MaxSize = 256 << 20

// Error is a run directory whose run.json cannot be read as a run: there
// is none, it is not a regular file, it is too large, it is not JSON, a
// field has the wrong type, or its schema is one this snapctl does not
// know. Msg says which in words, without the directory.
type Error struct {
	Dir string
	Msg string
	// Err is the cause, when there is one: fs.ErrNotExist for a missing
	// run.json, the *fsutil.NotFileError, *fsutil.TooLargeError,
	// *json.SyntaxError or *json.UnmarshalTypeError.
	Err error
}

func (e *Error) Error() string { return e.Dir + ": " + e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Read reads the run.json of the run directory dir, of schema Schema or
// SchemaV1, whatever the run's status. It must be a regular file (a
// symlink to one is fine) of at most MaxSize bytes; the read ends when ctx
// does.
//
// The stacks are left as written: inline with v1, named by stack_id in
// Stacks with v2. A reader that wants them calls Manifest.ResolveStacks,
// after which both schemas read alike; one that does not (compare reads
// the suspects' frames only) is not refused for a stack table it never
// looks at.
//
// An error is an *Error, except when ctx ended the read: then it is the
// *fsutil.InterruptedError, for the caller's interrupted exit.
func Read(ctx context.Context, dir string) (*Manifest, error) {
	data, err := fsutil.ReadFile(ctx, filepath.Join(dir, "run.json"), fsutil.ReadOptions{What: "run.json", Limit: MaxSize})
	var interrupted *fsutil.InterruptedError
	switch {
	case errors.As(err, &interrupted):
		return nil, err
	case errors.Is(err, fs.ErrNotExist):
		msg := "not a run directory: it has no run.json"
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			msg = "no such run directory"
		}
		return nil, &Error{Dir: dir, Msg: msg, Err: err}
	case errors.Is(err, syscall.ENOTDIR):
		return nil, &Error{Dir: dir, Msg: "not a run directory: it is a file", Err: err}
	case err != nil:
		return nil, &Error{Dir: dir, Msg: withoutDir(err), Err: err}
	}
	m := new(Manifest)
	if err := json.Unmarshal(data, m); err != nil {
		var syn *json.SyntaxError
		// A schema this snapctl does not know may well type a field
		// otherwise: say that, rather than which field.
		if !errors.As(err, &syn) && m.Schema != "" && !known(m.Schema) {
			return nil, schemaError(dir, m.Schema)
		}
		return nil, &Error{Dir: dir, Msg: decodeMessage(data, err), Err: err}
	}
	if !known(m.Schema) {
		return nil, schemaError(dir, m.Schema)
	}
	return m, nil
}

// withoutDir says what is wrong with run.json without naming the directory,
// which Error names already: "run.json is a FIFO, not a regular file".
func withoutDir(err error) string {
	var (
		notFile  *fsutil.NotFileError
		tooLarge *fsutil.TooLargeError
		pe       *fs.PathError
	)
	switch {
	case errors.As(err, &notFile):
		return "run.json " + notFile.Reason()
	case errors.As(err, &tooLarge):
		e := *tooLarge
		e.Path = "run.json"
		return e.Error()
	case errors.As(err, &pe):
		return "run.json: " + pe.Err.Error()
	}
	return err.Error()
}

// known says whether Read reads run.json of schema s. v2 only moved the
// stacks into a table, which ResolveStacks undoes: a run recorded before
// the upgrade reads as one after.
func known(s string) bool { return s == Schema || s == SchemaV1 }

func schemaError(dir, schema string) *Error {
	return &Error{Dir: dir, Msg: fmt.Sprintf("run.json has schema %q; this snapctl reads %s and %s", schema, SchemaV1, Schema)}
}

// decodeMessage says what is wrong with a run.json that does not decode:
// where its syntax breaks, or which field holds what type.
func decodeMessage(data []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line := 1 + bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n"))
		return fmt.Sprintf("run.json is not valid JSON: line %d (byte %d): %v", line, syn.Offset, err)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the document"
		}
		return fmt.Sprintf("run.json is valid JSON but not a run: field %s (byte %d) is %s, where snapctl expects %s", field, typ.Offset, article(typ.Value), jsonTypeName(typ.Type))
	}
	// json.Unmarshal checks the syntax first: this is a field's own
	// decoder, which does not name the field ("Time.UnmarshalJSON: input
	// is not a JSON string").
	return "run.json is valid JSON but not a run: " + err.Error()
}

// jsonTypeName is how a JSON document spells the kind of a Go type.
func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return jsonTypeName(t.Elem())
	}
	if t.ConvertibleTo(reflect.TypeFor[float64]()) {
		if k := t.Kind(); k >= reflect.Int && k <= reflect.Uint64 {
			return "an integer"
		}
		return "a number"
	}
	return t.String()
}

// article puts "a" or "an" before one of encoding/json's value kinds.
func article(kind string) string {
	switch {
	case kind == "":
		return "a value"
	case strings.ContainsRune("aeiou", rune(kind[0])):
		return "an " + kind
	}
	return "a " + kind
}
