package kube

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// core is a REST client of the four core/v1 resources the reaper uses, over
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
func (c *core) pods(ns string) Objects[*corev1.Pod] {
	return Objects[*corev1.Pod]{c, "pods", ns, func() *corev1.Pod { return &corev1.Pod{} }}
}

func (c *core) serviceAccounts(ns string) Objects[*corev1.ServiceAccount] {
	return Objects[*corev1.ServiceAccount]{c, "serviceaccounts", ns, func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} }}
}

func (c *core) events(ns string) Objects[*corev1.Event] {
	return Objects[*corev1.Event]{c, "events", ns, func() *corev1.Event { return &corev1.Event{} }}
}

func (c *core) configMaps(ns string) Objects[*corev1.ConfigMap] {
	return Objects[*corev1.ConfigMap]{c, "configmaps", ns, func() *corev1.ConfigMap { return &corev1.ConfigMap{} }}
}

// Objects is the requests of one core/v1 resource in one namespace, in
// protobuf, made as client-go's generated clients make them. It is not
// client-go's generic typed client (package gentype), because that package
// links client-go's fakes and, through them, server-side apply's merge
// code, OpenAPI models and YAML: 4.3 MB of the binary, whose pages and
// start-up cost 2.5 MiB of resident memory in every sweep.
type Objects[T runtime.Object] struct {
	c        *core
	resource string
	ns       string
	empty    func() T
}

func (r Objects[T]) req(verb func() *rest.Request) *rest.Request {
	return verb().UseProtobufAsDefaultIfPreferred(true).Namespace(r.ns).Resource(r.resource)
}

func (r Objects[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.empty()
	err := r.req(r.c.rest.Get).Name(name).VersionedParams(&opts, r.c.params).Do(ctx).Into(out)
	return out, err
}

func (r Objects[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.empty()
	err := r.req(r.c.rest.Post).VersionedParams(&opts, r.c.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r Objects[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	name := ""
	if o, ok := any(obj).(metav1.Object); ok {
		name = o.GetName()
	}
	out := r.empty()
	err := r.req(r.c.rest.Put).Name(name).VersionedParams(&opts, r.c.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r Objects[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.req(r.c.rest.Delete).Name(name).Body(&opts).Do(ctx).Error()
}

// listPods is one page of the pods in ns.
func (c *core) listPods(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	out := &corev1.PodList{}
	err := c.pods(ns).req(c.rest.Get).VersionedParams(&opts, c.params).Timeout(timeout).Do(ctx).Into(out)
	return out, err
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
