package kube

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
)

// core is client-go's generic typed client (the one the Clientset's core/v1
// clients are made of) for the four core/v1 resources the reaper uses, over
// a scheme that holds core/v1 alone. The Clientset would register every
// API group's types at start-up and link every group's client: measured on
// the shipped binary, it was a third of its size and 6 MiB of its resident
// memory before the first request, in a process that runs for a second.
type core struct {
	rest   rest.Interface
	params runtime.ParameterCodec
}

// newCore builds the core/v1 client from cfg (copied, not changed) over hc,
// the Client's one counted HTTP client.
func newCore(cfg *rest.Config, hc *http.Client) (*core, error) {
	scheme := runtime.NewScheme()
	// The option types (ListOptions, DeleteOptions...) the parameter
	// codec encodes, as client-go's own scheme registers them.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("core/v1 scheme: %w", err)
	}
	c := rest.CopyConfig(cfg)
	gv := corev1.SchemeGroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/api"
	c.NegotiatedSerializer = trimming{rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()}
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, fmt.Errorf("core/v1 client for %s: %w", c.Host, err)
	}
	return &core{rest: rc, params: runtime.NewParameterCodec(scheme)}, nil
}

// pods is the pods in ns. The pods of a list read through it are trimmed
// to what View reads (see trimmingDecoder); a single pod is whole.
func (c *core) pods(ns string) *gentype.ClientWithList[*corev1.Pod, *corev1.PodList] {
	return gentype.NewClientWithList("pods", c.rest, c.params, ns,
		func() *corev1.Pod { return &corev1.Pod{} },
		func() *corev1.PodList { return &corev1.PodList{} },
		gentype.PrefersProtobuf[*corev1.Pod]())
}

func (c *core) serviceAccounts(ns string) *gentype.Client[*corev1.ServiceAccount] {
	return typed(c, "serviceaccounts", ns, func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} })
}

func (c *core) events(ns string) *gentype.Client[*corev1.Event] {
	return typed(c, "events", ns, func() *corev1.Event { return &corev1.Event{} })
}

func (c *core) configMaps(ns string) *gentype.Client[*corev1.ConfigMap] {
	return typed(c, "configmaps", ns, func() *corev1.ConfigMap { return &corev1.ConfigMap{} })
}

// createEvent creates ev with no retry. An Event is optional: client-go
// would otherwise retry a 429 or a 5xx with Retry-After up to ten times,
// and an Event's answer is never worth waiting for. The required writes
// (deletes, the finalizer patch) keep client-go's retries of such answers,
// bounded by the budget of the action's Kubernetes writes (package reap).
func (c *core) createEvent(ctx context.Context, ev *corev1.Event, dryRun bool) error {
	return c.rest.Post().Namespace(ev.Namespace).Resource("events").
		VersionedParams(&metav1.CreateOptions{DryRun: dryRunOption(dryRun)}, c.params).
		Body(ev).MaxRetries(0).Do(ctx).Error()
}

// typed is the client of one resource in ns, in protobuf.
func typed[T interface {
	runtime.Object
	metav1.Object
}](c *core, resource, ns string, empty func() T) *gentype.Client[T] {
	return gentype.NewClient(resource, c.rest, c.params, ns, empty, gentype.PrefersProtobuf[T]())
}

// trimming is the core client's serializers with the protobuf decoder
// wrapped in trimmingDecoder, so that every page of pods it reads is
// trimmed before it is decoded.
type trimming struct {
	runtime.NegotiatedSerializer
}

func (t trimming) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := t.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	for i, info := range infos {
		if info.MediaType == runtime.ContentTypeProtobuf {
			info.Serializer = trimmingDecoder{info.Serializer}
		}
		out[i] = info
	}
	return out
}
