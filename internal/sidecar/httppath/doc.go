// Package httppath normalizes HTTP request paths for matching, for every front that matches
// policies on paths (the reverse proxy today; ext_authz and forward auth later). A front
// passes the escaped path of the request target exactly as received (TargetPath extracts it
// from a request-target) and gets back a Path: the normalized escaped path, which is what it
// matches and what it forwards, or an error saying why the path is refused. A front answers
// a refused path with 400 and never forwards it.
//
// # Why
//
// A limit on /login must hold for every spelling of /login that the upstream serves as
// /login. nginx, Spring, Tomcat and most frameworks resolve "/./login", "//login",
// "/x/../login" and "/%6Cogin" to /login; a limiter matching raw paths would count none of
// them. So paths are normalized before matching, and the normalized path is what the
// upstream receives: the limiter and the upstream then name the same resource.
//
// # Normalization (RFC 3986 section 6.2.2)
//
// In this order:
//
//  1. Percent-encoded unreserved characters (ALPHA, DIGIT, "-", ".", "_", "~") are decoded:
//     "%6C" is "l" and "%2e%2e" is "..". Every other escape keeps its encoding with its hex
//     upper-cased ("%c3%a9" is "%C3%A9"). A byte that may not appear raw in a path (space,
//     `"`, "<", ">", "[", "]", "^", "`", "{", "|", "}", and bytes of 0x80 and above) is
//     percent-encoded.
//  2. Repeated slashes are merged: "//login" is "/login" (as nginx's merge_slashes does).
//  3. Dot segments are removed (RFC 3986 section 5.2.4): "/x/../login" is "/login", and a
//     path that climbs above the root stays at the root ("/../x" is "/x").
//
// The result never contains "//", "/./" or "/../" and never ends in "/." or "/..";
// normalizing it again changes nothing.
//
// # Refused paths
//
// A path is refused when upstreams disagree about which resource it names, because the
// limiter then cannot know which policy governs it:
//
//   - An encoded slash, "%2F": some servers decode it into a segment separator (so
//     "/api%2Flogin" is /api/login), others keep it inside one segment name.
//   - A backslash, raw or encoded ("\", "%5C"): Windows-style servers and some Java
//     containers treat it as "/", others as an ordinary character.
//   - An encoded NUL or control byte ("%00" to "%1F", "%7F"), or a raw one: C-based servers
//     and file lookups truncate at NUL, others strip, keep or refuse control bytes.
//   - A path that does not start with "/" (RFC 9112 section 3.2.1 origin-form), except the
//     asterisk-form "*" of OPTIONS (ParseTarget), which matches no path prefix. A raw "?" or
//     "#" in the path (TargetPath splits the query off; a fragment is never sent) is refused
//     too: some servers cut the path there and others do not.
//   - An invalid percent escape ("%zz", "%4", a trailing "%"): servers refuse it, pass it
//     through literally, or decode part of it.
//
// # Matching
//
// A Prefix matches whole segments of a path's match key: "/api" matches "/api", "/api/"
// and "/api/x", not "/apix". The match key differs from the normalized path in two ways
// that both make a prefix match more paths, never fewer:
//
//   - Segment parameters are ignored: each segment's ";..." (and "%3B...", for servers that
//     decode before they split) is removed, and dot segments and repeated slashes this
//     uncovers are removed again. Tomcat and Spring serve "/login;jsessionid=x" as /login and
//     "/x/..;/login" as /login, so a prefix /login matches both. The forwarded path keeps its
//     parameters.
//   - Letters are compared ASCII-case-insensitively, so a prefix /login matches "/LOGIN".
//     On a case-sensitive upstream the extra match only rate-limits a request that gets a
//     404; on a case-insensitive one (IIS, Spring with case-insensitive matching, many
//     Windows or macOS file servers) not matching would be a bypass.
//
// A policy's prefix is normalized the same way (NewPrefix). A prefix that would be refused as
// a path (for example one holding "%2F") matches no path: every path it could name is
// refused anyway.
package httppath
