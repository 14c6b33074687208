// Package textwalk applies a function to every string inside a value: the fields of a struct
// (exported ones), through pointers, interfaces, slices, arrays and map values.
package textwalk

import (
	"reflect"
	"strings"
	"unicode/utf8"
)

// Storable returns s as text every store and git accept: each NUL and each invalid UTF-8
// sequence replaced by U+FFFD (PostgreSQL text refuses both; git refuses a NUL in a commit
// message). s is returned as is when it already is.
func Storable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// Map replaces every string s reachable from ptr (a non-nil pointer) with fn(s): struct fields
// that are exported, elements of slices and arrays, map values (not keys), through pointers and
// interfaces. Named string types (type Kind string) count as strings. fn is called only for
// strings it may change; unexported fields are left alone.
func Map(ptr any, fn func(string) string) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	walk(v.Elem(), fn)
}

func walk(v reflect.Value, fn func(string) string) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			if s := v.String(); s != "" {
				if out := fn(s); out != s {
					v.SetString(out)
				}
			}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walk(v.Elem(), fn)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walk(v.Field(i), fn)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walk(v.Index(i), fn)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(iter.Value())
			walk(val, fn)
			v.SetMapIndex(iter.Key(), val)
		}
	}
}
