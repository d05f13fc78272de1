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
	postponed, held, oldest  *prometheus.Desc
	outboxOldest             *prometheus.Desc
}

func newStoreCollector(db *store.DB, log *slog.Logger) *storeCollector {
	return &storeCollector{
		db:         db,
		log:        log,
		runs:       prometheus.NewDesc("iterion_runs", "Runs in the store, by status.", []string{"status"}, nil),
		deliveries: prometheus.NewDesc("iterion_deliveries_pending", "Deliveries (webhooks) stored and not yet handled, postponed ones included.", nil, nil),
		postponed:  prometheus.NewDesc("iterion_deliveries_postponed", "Deliveries waiting for the time their channel gave (a rate limit).", nil, nil),
		held:       prometheus.NewDesc("iterion_deliveries_held", "Deliveries held for an installation GitHub mints no token for, until it is back.", nil, nil),
		oldest:     prometheus.NewDesc("iterion_deliveries_oldest_age_seconds", "Age of the oldest delivery not yet handled; 0 when none.", nil, nil),
		outbox:     prometheus.NewDesc("iterion_outbox_rows", "Side effects (PR comments) not yet performed.", nil, nil),
		outboxOldest: prometheus.NewDesc("iterion_outbox_oldest_age_seconds",
			"Age of the oldest side effect not yet performed (a comment GitHub keeps refusing, a channel rate-limited); 0 when none.", nil, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.runs
	ch <- c.deliveries
	ch <- c.postponed
	ch <- c.held
	ch <- c.oldest
	ch <- c.outbox
	ch <- c.outboxOldest
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
	if b, err := c.db.DeliveryBacklog(ctx); err == nil {
		age := 0.0
		if !b.Oldest.IsZero() {
			age = max(time.Since(b.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.GaugeValue, float64(b.Due+b.Postponed+b.Held))
		ch <- prometheus.MustNewConstMetric(c.postponed, prometheus.GaugeValue, float64(b.Postponed))
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(b.Held))
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
	} else {
		c.log.Error("metrics: counting pending deliveries failed", "err", err)
	}
	if rows, err := c.db.DueOutbox(ctx, time.Now().Add(100*365*24*time.Hour), 0); err == nil {
		ch <- prometheus.MustNewConstMetric(c.outbox, prometheus.GaugeValue, float64(len(rows)))
		age := 0.0
		for _, r := range rows {
			if !r.CreatedAt.IsZero() {
				age = max(age, time.Since(r.CreatedAt).Seconds())
			}
		}
		ch <- prometheus.MustNewConstMetric(c.outboxOldest, prometheus.GaugeValue, age)
	} else {
		c.log.Error("metrics: listing the outbox failed", "err", err)
	}
}

// sandboxCollector reports whether the server's sandbox driver can run
// processes: runs are refused while it cannot.
type sandboxCollector struct {
	driver    string
	available func() error
	desc      *prometheus.Desc
}

func newSandboxCollector(driver string, available func() error) *sandboxCollector {
	return &sandboxCollector{driver: driver, available: available, desc: prometheus.NewDesc("iterion_sandbox_available",
		"1 when the server's sandbox driver can run processes, 0 when runs are refused (SANDBOX_UNAVAILABLE; the log says the fix).", []string{"driver"}, nil)}
}

func (c *sandboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	v := 1.0
	if c.available() != nil {
		v = 0
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, c.driver)
}

// metricsHandler serves /metrics: the store's figures and the Go runtime's.
// Channels add their own collectors (the GitHub App's refused
// installations).
func metricsHandler(db *store.DB, log *slog.Logger, more ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newStoreCollector(db, log))
	reg.MustRegister(more...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)})
}
