package config

import (
	"reflect"
	"strings"
)

// RestartOnly returns the names of the settings that differ between old
// and next but take effect on restart only: the fields tagged
// `restart:"name"` beside their definition (a listener's address, the log
// format); `restart:"name,onoff"` on a pointer means turning the section
// on or off, its contents reloading. Names are in field order; nil when
// none changed.
func RestartOnly(old, next *Config) []string {
	var names []string
	restartDiff(reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem(), &names)
	return names
}

// restartDiff appends to names the tagged fields of the structs a and b
// (of one type) that differ, looking into nested structs.
func restartDiff(a, b reflect.Value, names *[]string) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		fa, fb := a.Field(i), b.Field(i)
		tag, tagged := f.Tag.Lookup("restart")
		name, onOff := strings.CutSuffix(tag, ",onoff")
		switch {
		case onOff:
			if fa.IsNil() != fb.IsNil() {
				*names = append(*names, name+" (on or off)")
			} else if !fa.IsNil() && fa.Elem().Kind() == reflect.Struct {
				restartDiff(fa.Elem(), fb.Elem(), names) // its own tagged fields
			}
		case tagged:
			if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
				*names = append(*names, name)
			}
		case f.Type.Kind() == reflect.Struct:
			restartDiff(fa, fb, names)
		}
	}
}
