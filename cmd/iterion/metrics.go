package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// storeCollector reports, at each scrape, what the store holds: runs by
// status, deliveries waiting for the worker and side effects waiting in
// the outbox. The store is the truth, so the figures survive restarts.
type storeCollector struct {
	db                       *store.DB
	log                      *slog.Logger
	runs, deliveries, outbox *prometheus.Desc
}

func newStoreCollector(db *store.DB, log *slog.Logger) *storeCollector {
	return &storeCollector{
		db:         db,
		log:        log,
		runs:       prometheus.NewDesc("iterion_runs", "Runs in the store, by status.", []string{"status"}, nil),
		deliveries: prometheus.NewDesc("iterion_deliveries_pending", "Webhook deliveries stored and not yet handled.", nil, nil),
		outbox:     prometheus.NewDesc("iterion_outbox_rows", "Side effects (PR comments) not yet performed.", nil, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.runs
	ch <- c.deliveries
	ch <- c.outbox
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	runs, err := c.db.Runs(ctx, engine.RunFilter{})
	if err != nil {
		c.log.Error("metrics: listing runs failed", "err", err)
		return
	}
	count := map[engine.Status]int{}
	for _, r := range runs {
		count[r.Status]++
	}
	for _, s := range []engine.Status{engine.StatusRunning, engine.StatusPausedWaitingHuman, engine.StatusFinished,
		engine.StatusFailed, engine.StatusFailedResumable, engine.StatusCancelled} {
		ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(count[s]), string(s))
	}
	if pending, err := c.db.PendingDeliveries(ctx, 0); err == nil {
		ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.GaugeValue, float64(len(pending)))
	}
	if rows, err := c.db.DueOutbox(ctx, time.Now().Add(100*365*24*time.Hour), 0); err == nil {
		ch <- prometheus.MustNewConstMetric(c.outbox, prometheus.GaugeValue, float64(len(rows)))
	}
}

// metricsHandler serves /metrics: the store's figures and the Go runtime's.
func metricsHandler(db *store.DB, log *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newStoreCollector(db, log))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)})
}
