package nodelink

import "github.com/prometheus/client_golang/prometheus"

// TrafficCollector reports what the link sent and received over every connection since it
// started: fila_cluster_link_bytes_sent_total, fila_cluster_link_bytes_received_total,
// fila_cluster_link_frames_sent_total, fila_cluster_link_frames_received_total, and the Raft
// heartbeats sent and spared (spare.go): fila_cluster_link_heartbeats_sent_total,
// fila_cluster_link_heartbeats_spared_total. An idle cluster whose queue groups sleep sends only
// its meta group's heartbeats.
func (l *Link) TrafficCollector() prometheus.Collector { return trafficCollector{l} }

var (
	bytesSentDesc = prometheus.NewDesc("fila_cluster_link_bytes_sent_total",
		"Bytes this node sent to the other nodes over the inter-node link.", nil, nil)
	bytesReceivedDesc = prometheus.NewDesc("fila_cluster_link_bytes_received_total",
		"Bytes this node received from the other nodes over the inter-node link.", nil, nil)
	framesSentDesc = prometheus.NewDesc("fila_cluster_link_frames_sent_total",
		"Frames (requests and answers) this node sent over the inter-node link.", nil, nil)
	framesReceivedDesc = prometheus.NewDesc("fila_cluster_link_frames_received_total",
		"Frames this node received over the inter-node link.", nil, nil)
	heartbeatsSentDesc = prometheus.NewDesc("fila_cluster_link_heartbeats_sent_total",
		"Raft heartbeats this node sent to the other nodes as leader of a group.", nil, nil)
	heartbeatsSparedDesc = prometheus.NewDesc("fila_cluster_link_heartbeats_spared_total",
		"Raft heartbeats not sent: the follower had accepted entries since the last one.", nil, nil)
)

type trafficCollector struct{ l *Link }

func (c trafficCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- bytesSentDesc
	ch <- bytesReceivedDesc
	ch <- framesSentDesc
	ch <- framesReceivedDesc
	ch <- heartbeatsSentDesc
	ch <- heartbeatsSparedDesc
}

func (c trafficCollector) Collect(ch chan<- prometheus.Metric) {
	s := &c.l.stats
	ch <- prometheus.MustNewConstMetric(bytesSentDesc, prometheus.CounterValue, float64(s.BytesSent.Load()))
	ch <- prometheus.MustNewConstMetric(bytesReceivedDesc, prometheus.CounterValue, float64(s.BytesReceived.Load()))
	ch <- prometheus.MustNewConstMetric(framesSentDesc, prometheus.CounterValue, float64(s.FramesSent.Load()))
	ch <- prometheus.MustNewConstMetric(framesReceivedDesc, prometheus.CounterValue, float64(s.FramesReceived.Load()))
	ch <- prometheus.MustNewConstMetric(heartbeatsSentDesc, prometheus.CounterValue, float64(s.HeartbeatsSent.Load()))
	ch <- prometheus.MustNewConstMetric(heartbeatsSparedDesc, prometheus.CounterValue, float64(s.HeartbeatsSpared.Load()))
}
