package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// completionTimeout bounds the broker call a shell completion makes: a tab press must not hang.
const completionTimeout = 2 * time.Second

// completeQueueArgs gives every command whose first argument names an existing queue (QUEUE, DLQ,
// or NAME under `queue` except create) shell completion of the broker's queue names; DLQ completes
// dead-letter queues only. Commands added later by other files get it too, by naming their
// argument QUEUE or DLQ. The shells' scripts come from `fila completion bash|zsh|fish|powershell`.
func (a *app) completeQueueArgs(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		a.completeQueueArgs(c)
	}
	if cmd.ValidArgsFunction != nil {
		return
	}
	fields := strings.Fields(cmd.Use)
	if len(fields) < 2 {
		return
	}
	switch arg := strings.Trim(fields[1], "[]"); {
	case arg == "QUEUE", arg == "NAME" && cmd.HasParent() && cmd.Parent().Name() == "queue" && cmd.Name() != "create":
		cmd.ValidArgsFunction = a.queueNames(func(string) bool { return true })
	case arg == "DLQ":
		cmd.ValidArgsFunction = a.queueNames(func(n string) bool { return strings.HasSuffix(n, ".dlq") })
	}
}

// queueNames completes the first argument with the names of the broker's queues that keep says.
func (a *app) queueNames(keep func(string) bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(a.timeout.Duration, completionTimeout))
		defer cancel()
		c, err := a.connect(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		l, err := c.ListQueues(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, q := range l.Queues {
			if strings.HasPrefix(q.Name, prefix) && keep(q.Name) {
				names = append(names, q.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
