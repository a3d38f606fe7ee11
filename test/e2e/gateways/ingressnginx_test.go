package gateways_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
)

// ingressNginxConf is what ingress-nginx's template (rootfs/etc/nginx/template/nginx.tmpl)
// writes for an Ingress rule on {HOST} with the auth-url annotation {AUTH_URL}, reduced to the
// lines that decide what the auth service is told and where the request goes: the default
// server (its default backend answers 404), and the rule's server with the auth location as
// the template writes it. ingress-nginx itself is not run here: it is this nginx
// configuration, generated from Ingress objects.
const ingressNginxConf = `pid nginx.pid;
error_log stderr warn;
events {}
http {
	access_log off;
	client_body_temp_path client_body_temp;
	proxy_temp_path proxy_temp;
	fastcgi_temp_path fastcgi_temp;
	uwsgi_temp_path uwsgi_temp;
	scgi_temp_path scgi_temp;
	server {
		listen {LISTEN} default_server;
		return 404;
	}
	server {
		listen {LISTEN};
		server_name {HOST};
		location = /_external-auth-Lw-Prefix {
			internal;
			proxy_pass_request_body off;
			proxy_set_header Content-Length "";
			proxy_set_header X-Forwarded-Proto "";
			proxy_set_header X-Original-URL $scheme://$http_host$request_uri;
			proxy_set_header X-Original-Method $request_method;
			proxy_set_header X-Sent-From "nginx-ingress-controller";
			proxy_set_header X-Real-IP $remote_addr;
			proxy_set_header X-Forwarded-For $remote_addr;
			proxy_set_header X-Auth-Request-Redirect $request_uri;
			proxy_http_version 1.1;
			set $target {AUTH_URL};
			proxy_pass $target;
		}
		location / {
			auth_request /_external-auth-Lw-Prefix;
			set $best_http_host $http_host;
			proxy_set_header Host $best_http_host;
			proxy_pass http://{UPSTREAM};
		}
	}
}
`

// TestIngressNginxJudgesTheRoutedHost: nginx routes a request whose target is absolute
// ("GET http://shop.example/api/items HTTP/1.1") by the target's host, while ingress-nginx
// tells the auth service the Host header ($http_host in X-Original-URL). With "Host:
// evil.example" every such request reached the app unlimited; the shipped Ingress's auth-url
// states the routed host (?host=$host), so the "reads" limit of shop.example counts them.
func TestIngressNginxJudgesTheRoutedHost(t *testing.T) {
	r := startRig(t, proc.MustBuild(t, "cmd/sidecar"))
	proxy := startIngressNginx(t, r)
	before := r.hits.Load()
	for i, want := range []int{200, 200, 200, 403, 403} {
		a := sendRaw(t, proxy, spelling{"GET http://" + host + "/api/items HTTP/1.1", []string{"evil.example"}}, "X-API-Key: mallory")
		if a.Status != want {
			t.Errorf("request %d for %s with Host evil.example: %v, want %d", i, host, a, want)
		}
	}
	if n := r.hits.Load() - before; n != 3 {
		t.Errorf("the app served %d of 5, want the limit, 3", n)
	}
	if a := sendRaw(t, proxy, spelling{"GET /api/items HTTP/1.1", []string{host}}, "X-API-Key: mallory"); a.Status != http.StatusForbidden {
		t.Errorf("the same caller with Host %s after: %v, want 403 (one limit)", host, a)
	}
}

// startIngressNginx runs ingressNginxConf with real nginx in front of r, for an Ingress rule
// on host with the auth-url of config/gateways/ingress-nginx as shipped, its Service address
// replaced with the sidecar's, and returns its address.
func startIngressNginx(t *testing.T, r *rig) string {
	t.Helper()
	var ing networkingv1.Ingress
	if err := yaml.Unmarshal([]byte(repoFile(t, "config/gateways/ingress-nginx/ingress.yaml")), &ing); err != nil {
		t.Fatal(err)
	}
	raw := ing.Annotations["nginx.ingress.kubernetes.io/auth-url"]
	authURL, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	target := strings.Replace(raw, authURL.Host, r.fwdAuth, 1)
	return runNginx(t, func(addr string) string {
		return strings.NewReplacer("{LISTEN}", addr, "{HOST}", host, "{AUTH_URL}", target,
			"{UPSTREAM}", r.upstream).Replace(ingressNginxConf)
	})
}
