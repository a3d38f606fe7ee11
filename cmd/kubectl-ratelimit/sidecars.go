package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
)

// injectorSelector selects the chart's sidecar injection webhook configuration, whose
// annotation inject.AnnotationSidecarImage names the image injected now.
const injectorSelector = "app.kubernetes.io/component=sidecar-injection"

// sidecarsOptions are the flags of "kubectl ratelimit sidecars".
type sidecarsOptions struct {
	conn          *connectionOptions
	allNamespaces bool
	output        string
}

// newSidecarsCommand is "kubectl ratelimit sidecars".
func newSidecarsCommand(conn *connectionOptions) *cobra.Command {
	o := &sidecarsOptions{conn: conn}
	cmd := &cobra.Command{
		Use:   "sidecars [-A]",
		Short: "List the Pods running an injected sidecar, and which run an older image than the one injected now",
		Long: `List the Pods that got the ratelimit sidecar by injection, with the sidecar's image and the
version of the manager that injected it, and mark the ones whose image is not the one the
injection webhook injects now (after a helm upgrade, until their workloads roll). Read with
your kubeconfig: list on pods, and get on mutatingwebhookconfigurations to know the current
image (without it, CURRENT shows "?").`,
		Example: `  kubectl ratelimit sidecars -A
  kubectl ratelimit sidecars -n shop -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.OutOrStdout()) },
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the Pods of every namespace")
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

// injectedPod is one row: a Pod with an injected sidecar.
type injectedPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Owner     string `json:"owner,omitempty"`
	Image     string `json:"image"`
	Version   string `json:"version,omitempty"`
	// Current is "yes" or "no" against the image injected now, "?" when that is unknown.
	Current string `json:"current"`
}

// run lists the injected Pods and compares each with the injector's image.
func (o *sidecarsOptions) run(ctx context.Context, out io.Writer) error {
	if err := checkOutput(o.output); err != nil {
		return err
	}
	cs, err := o.conn.kubeClient()
	if err != nil {
		return err
	}
	ns := ""
	if !o.allNamespaces {
		if ns, err = o.conn.namespace(); err != nil {
			return err
		}
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: inject.LabelInjected + "=true"})
	if err != nil {
		return fmt.Errorf("listing injected pods: %w", err)
	}
	current := injectedImages(ctx, cs)
	rows := make([]injectedPod, 0, len(pods.Items))
	for i := range pods.Items {
		rows = append(rows, rowOf(&pods.Items[i], current))
	}
	sort.Slice(rows, func(i, k int) bool {
		return rows[i].Namespace+"/"+rows[i].Name < rows[k].Namespace+"/"+rows[k].Name
	})
	if o.output == "json" {
		body, err := json.Marshal(map[string]any{"injecting": slices.Sorted(maps.Keys(current)), "pods": rows})
		if err != nil {
			return err
		}
		return writeJSON(out, body)
	}
	return writeSidecars(out, rows, current)
}

// injectedImages is the set of images the installed injection webhooks inject now; empty
// when none can be read (none installed, or no right to read them).
func injectedImages(ctx context.Context, cs kubernetes.Interface) map[string]bool {
	out := map[string]bool{}
	list, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: injectorSelector})
	if err != nil {
		return out
	}
	for _, c := range list.Items {
		if img := c.Annotations[inject.AnnotationSidecarImage]; img != "" {
			out[img] = true
		}
	}
	return out
}

// rowOf is pod's row: its sidecar's image as the Pod runs it (the init container's spec).
func rowOf(pod *corev1.Pod, current map[string]bool) injectedPod {
	row := injectedPod{Namespace: pod.Namespace, Name: pod.Name, Version: pod.Labels[inject.LabelSidecarVersion],
		Image: pod.Annotations[inject.AnnotationSidecarImage], Current: "?"}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == inject.ContainerName {
			row.Image = c.Image
		}
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		row.Owner = ref.Kind + "/" + ref.Name
	}
	if len(current) > 0 {
		row.Current = "no"
		if current[row.Image] {
			row.Current = "yes"
		}
	}
	return row
}

// writeSidecars prints the rows and a summary line.
func writeSidecars(w io.Writer, rows []injectedPod, current map[string]bool) error {
	table := [][]string{{"NAMESPACE", "POD", "OWNER", "SIDECAR IMAGE", "VERSION", "CURRENT"}}
	outdated := 0
	for _, r := range rows {
		table = append(table, []string{r.Namespace, r.Name, r.Owner, r.Image, r.Version, r.Current})
		if r.Current == "no" {
			outdated++
		}
	}
	if err := writeRows(w, table); err != nil {
		return err
	}
	summary := fmt.Sprintf("\n%d pods with an injected sidecar; ", len(rows))
	switch {
	case len(current) == 0:
		summary += "the image injected now is unknown (no sidecar-injection webhook configuration could be read)"
	case outdated > 0:
		summary += fmt.Sprintf("%d run an older image than %v: restart their workloads (kubectl rollout restart) to update them", outdated, slices.Sorted(maps.Keys(current)))
	default:
		summary += fmt.Sprintf("all run %v", slices.Sorted(maps.Keys(current)))
	}
	_, err := fmt.Fprintln(w, summary)
	return err
}
