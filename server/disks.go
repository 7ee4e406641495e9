package server

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cordonhq/cordon/server/config"
	"github.com/cordonhq/cordon/server/disk"
)

// mountDisks mounts each tenant's own file system over its root (quotas.disk), before
// anything reads or writes there: a tenant's sandboxes, stages and logs then fill its
// disk, never the host's. A disk that cannot be had stops the server: serving the
// tenant from the host's file system instead would lift its bound silently.
func (s *Server) mountDisks(ctx context.Context) error {
	for _, t := range s.cfg.Tenants {
		if t.Quotas.Disk == 0 {
			s.log.Warn("tenant root on the host's file system: its disk use is bounded by nothing cordon sets (quotas.disk: host)", logTenant, t.Name)
			continue
		}
		err := disk.Mount(ctx, tenantDisk(t))
		if errors.Is(err, disk.ErrGrowLater) {
			s.log.Warn("tenant disk", logTenant, t.Name, logErr, err)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unmountDisks unmounts, at the server's stop, the disk of each tenant none of whose
// sessions still runs; the others stay mounted for the sessions (and their next
// server, which adopts them).
func (s *Server) unmountDisks() {
	for _, t := range s.cfg.Tenants {
		if t.Quotas.Disk == 0 {
			continue
		}
		roots := tenantRootsOf(t)
		live := false
		for _, rec := range records(roots) {
			if state(roots, rec) == stateRunning {
				live = true
				break
			}
		}
		if live {
			s.log.Info("tenant disk left mounted: sessions still run on it", logTenant, t.Name)
			continue
		}
		if err := disk.Unmount(t.Root); err != nil {
			s.log.Warn("tenant disk left mounted", logTenant, t.Name, logErr, err)
		}
	}
}

func tenantDisk(t config.Tenant) disk.Disk { return disk.New(t.Root, t.Quotas.Disk) }

// diskCollector reports each tenant's disk at every scrape: its size and what its
// sandboxes may still write (one statfs per tenant with a disk).
type diskCollector struct {
	desc  *prometheus.Desc
	disks []config.Tenant
}

func newDiskCollector(cfg *config.Config) *diskCollector {
	c := &diskCollector{desc: prometheus.NewDesc("cordon_tenant_disk_bytes",
		"Each tenant's disk (quotas.disk), by tenant and kind: size, or available (what its sandboxes may still write).",
		[]string{"tenant", "kind"}, nil)}
	for _, t := range cfg.Tenants {
		if t.Quotas.Disk > 0 {
			c.disks = append(c.disks, t)
		}
	}
	return c
}

func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.disks {
		size, avail, err := disk.Space(t.Root)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(size), t.Name, "size")
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(avail), t.Name, "available")
	}
}
