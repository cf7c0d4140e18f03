package config

// Admin is the `admin:` section: the admin page served on admin_listen
// (README.md, "Admin page").
type Admin struct {
	// ShowClientIPs shows client addresses in the top refused list as they
	// are; false (the default) shows a keyed hash of each instead.
	ShowClientIPs bool
	// BasicAuth, when non-nil, protects the page and its JSON with HTTP
	// Basic authentication (RFC 7617); it is required to serve the page on
	// an admin_listen that is not a loopback address.
	BasicAuth *BasicAuth
}

// BasicAuth is one user and password; the password comes from the
// environment variable named by password_env, never from the file.
type BasicAuth struct {
	User     string
	Password string
}

// minAdminPassword is the shortest admin password accepted, in bytes.
const minAdminPassword = 12

// admin decodes `admin:`.
func (l *loader) admin(top object) {
	n := top.get("admin")
	if n == nil {
		return
	}
	o := l.object(n, "admin", top.keys["admin"].Line, "show_client_ips", "basic_auth")
	if v := o.get("show_client_ips"); v != nil {
		if b, ok := l.boolean(v, o.field("show_client_ips")); ok {
			l.c.Admin.ShowClientIPs = b
		}
	}
	an := o.get("basic_auth")
	if an == nil {
		return
	}
	ao := l.object(an, "admin.basic_auth", o.keys["basic_auth"].Line, "user", "password_env")
	if ao.bad {
		return
	}
	var ba BasicAuth
	ok := true
	if u := ao.get("user"); u == nil {
		l.errorf(ao.missing(), ao.field("user"), "required: the user name the browser sends")
		ok = false
	} else if s, good := l.str(u, ao.field("user")); !good {
		ok = false
	} else if !validUser(s) {
		l.errorf(u, ao.field("user"), "%q: want 1 to 64 printable characters without a colon (RFC 7617)", s)
		ok = false
	} else {
		ba.User = s
	}
	if p := ao.get("password_env"); p == nil {
		l.errorf(ao.missing(), ao.field("password_env"), "required: the environment variable holding the password")
		ok = false
	} else if s, good := l.secretEnv(p, ao.field("password_env"), minAdminPassword); good {
		ba.Password = s
	} else {
		ok = false
	}
	if ok {
		l.c.Admin.BasicAuth = &ba
	}
}

// validUser reports whether s can be a Basic user-id: no colon (RFC 7617
// §2 splits user-pass at the first one), no control characters.
func validUser(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if r == ':' || r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
