package main

import (
	"fmt"

	"github.com/filamq/fila/generated/fibp"
	"github.com/spf13/cobra"
)

var reclassifyNames = map[string]fibp.Reclassify{
	"all": fibp.ReclassifyAll, "unclassified": fibp.ReclassifyUnclassifiedOnly, "none": fibp.ReclassifyNone,
}

func (a *app) redriveCommand() *cobra.Command {
	var count uint64
	var reclassify string
	cmd := &cobra.Command{
		Use:   "redrive DLQ",
		Short: "Move dead-lettered messages back to their queue",
		Args:  exactArgs("DLQ"),
	}
	cmd.Flags().Uint64VarP(&count, "count", "n", 0, "how many messages, oldest first (0 = all)")
	cmd.Flags().StringVar(&reclassify, "reclassify", "all", "run on_enqueue again for: all, unclassified or none")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		rc, err := choice("reclassify", reclassify, reclassifyNames)
		if err != nil {
			return err
		}
		c, ctx, cancel, err := a.request(cmd)
		if err != nil {
			return err
		}
		defer cancel()
		res, err := c.Redrive(ctx, args[0], count, rc)
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(res)
		}
		_, err = fmt.Fprintf(a.stdout, "redriven %d; left in %s: %d unclassified, %d rejected by script\n",
			res.Redriven, args[0], res.LeftUnclassified, res.RejectedByScript)
		return err
	}
	return cmd
}
