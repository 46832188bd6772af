package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Dynalite is a running dynalite with a client that talks to it.
type Dynalite struct {
	URL    string
	Client *dynamodb.Client
	// stdin is the write end of dynalite's stdin. It is never closed: the
	// test process ending closes it, and dynalite exits on its end.
	// Holding it here also keeps its finalizer from closing it early.
	stdin *os.File
	cmd   *exec.Cmd
	out   *syncBuffer
}

// CreateTable creates a table and waits until it is active.
func (d *Dynalite) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput) error {
	if _, err := d.Client.CreateTable(ctx, in); err != nil {
		return fmt.Errorf("create table %s in dynalite: %w\n%s", aws.ToString(in.TableName), err, d.out.String())
	}
	// dynalite turns a table ACTIVE on its next tick; the SDK's waiter would
	// sleep 20 s at least after a first CREATING, so poll briefly instead.
	for {
		out, err := d.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName})
		if err == nil && out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for table %s in dynalite: %w (last: %v)", aws.ToString(in.TableName), ctx.Err(), err) //nolint:errorlint // the timeout is the cause; the last answer, nil when it was a table not yet active, is context
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StartDynalite starts dynalite, the real DynamoDB-compatible server that
// `make test` installs from the npm registry into tools/dynalite, on a free
// loopback port. It lives as long as the test process: preloaded with
// tools/dynalite/exit-with-parent.js, it exits when its stdin, held by this
// process, closes. It fails, never skips, when node or dynalite is missing.
func StartDynalite() (*Dynalite, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not installed (run `make test`, which installs dynalite with npm): %w", err)
	}
	dir := filepath.Join(root, "tools", "dynalite")
	cli := filepath.Join(dir, "node_modules", "dynalite", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		return nil, fmt.Errorf("dynalite is not installed in %s (run `make test`, which runs npm ci --prefix tools/dynalite): %w", dir, err)
	}
	watchdog := filepath.Join(dir, "exit-with-parent.js")

	// A free port can be taken between finding it and dynalite listening
	// on it; dynalite then exits at once, and another port is tried.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := startDynaliteOnce(node, watchdog, cli)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startDynaliteOnce(node, watchdog, cli string) (*Dynalite, error) {
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe for dynalite: %w", err)
	}
	out := &syncBuffer{}
	cmd := exec.Command(node, "--require", watchdog, cli,
		"--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, out, out
	if err := cmd.Start(); err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("start %s: %w", cli, err)
	}
	stdinR.Close() // dynalite has its own copy
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited //nolint:errcheck // killed just now: its exit error says only that
		stdinW.Close()
	}

	url := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitAnswers(url, exited, 20*time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("dynalite on %s: %w\n%s", url, err, out.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := dynaliteClient(ctx, url)
	if err != nil {
		stop()
		return nil, err
	}
	return &Dynalite{URL: url, Client: client, stdin: stdinW, cmd: cmd, out: out}, nil
}

// waitAnswers polls dynalite's health check until it answers, it exits, or
// the time is up.
func waitAnswers(url string, exited <-chan error, within time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(within)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("exited before answering: %v", err) //nolint:errorlint // nil when dynalite exited 0, which %w would print as %!w(<nil>)
		default:
		}
		if resp, err := hc.Get(url + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %s", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// dynaliteClient is the client the Lambda builds, with static credentials
// and nothing from the machine's AWS configuration, pointed at url.
func dynaliteClient(ctx context.Context, url string) (*dynamodb.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")),
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
	)
	if err != nil {
		return nil, fmt.Errorf("aws config for dynalite: %w", err)
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(url)
	}), nil
}
