package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// admin runs one kadm operation (-op) and prints its result:
//
//	create         -topics a,b -partitions N [-config k=v]: {"topic","err","partitions"} per topic
//	list           every topic: {"topic","partitions","err"} per topic
//	describe       -topics a,b: {"topic","partitions","replicas"} per topic, from metadata
//	configs        -topics a: {"topic","configs":{k: v}} per topic
//	alter          -topics a -config k=v (incremental set): {"topic","err"} per topic
//	delete         -topics a,b: {"topic","err"} per topic
//	groups         [-group g]: {"group","state","protocol_type"} per group; with -group also its
//	               description {"describe":…} and committed offsets {"offsets":{topic:{partition:offset}}}
//	end-offsets    -topics a: {"topic","partition","offset"} per partition
func admin(args []string) error {
	f := newFlags("admin")
	op := f.String("op", "", "operation")
	topicList := f.String("topics", "", "comma-separated topics")
	partitions := f.Int("partitions", 1, "partitions for create")
	config := f.String("config", "", "k=v")
	groupID := f.String("group", "", "group for groups")
	ctx, cancel := f.parse(args)
	defer cancel()
	cl, err := kgo.NewClient(f.opts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var topics []string
	if *topicList != "" {
		topics = strings.Split(*topicList, ",")
	}
	var configs map[string]*string
	var alter []kadm.AlterConfig
	if k, v, ok := strings.Cut(*config, "="); ok {
		configs = map[string]*string{k: kadm.StringPtr(v)}
		alter = []kadm.AlterConfig{{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)}}
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	switch *op {
	case "create":
		res, err := adm.CreateTopics(ctx, int32(*partitions), 1, configs, topics...)
		if err != nil {
			return err
		}
		for _, t := range topics {
			r := res[t]
			emit(map[string]any{"topic": t, "err": errText(r.Err), "partitions": r.NumPartitions})
		}
	case "list", "describe":
		details, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return err
		}
		for _, name := range details.Names() {
			d := details[name]
			replicas := map[int32][]int32{}
			for p, pd := range d.Partitions {
				replicas[p] = pd.Replicas
			}
			emit(map[string]any{"topic": name, "err": errText(d.Err), "partitions": len(d.Partitions), "replicas": replicas})
		}
	case "configs":
		res, err := adm.DescribeTopicConfigs(ctx, topics...)
		if err != nil {
			return err
		}
		for _, rc := range res {
			values := map[string]any{}
			for _, c := range rc.Configs {
				values[c.Key] = c.Value
			}
			emit(map[string]any{"topic": rc.Name, "err": errText(rc.Err), "configs": values})
		}
	case "alter":
		res, err := adm.AlterTopicConfigs(ctx, alter, topics...)
		if err != nil {
			return err
		}
		for _, r := range res {
			emit(map[string]any{"topic": r.Name, "err": errText(r.Err)})
		}
	case "delete":
		res, err := adm.DeleteTopics(ctx, topics...)
		if err != nil {
			return err
		}
		for _, t := range topics {
			emit(map[string]any{"topic": t, "err": errText(res[t].Err)})
		}
	case "groups":
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return err
		}
		names := listed.Groups()
		sort.Strings(names)
		for _, g := range names {
			emit(map[string]any{"group": g, "state": listed[g].State, "protocol_type": listed[g].ProtocolType})
		}
		if *groupID == "" {
			return nil
		}
		described, err := adm.DescribeGroups(ctx, *groupID)
		if err != nil {
			return err
		}
		d := described[*groupID]
		emit(map[string]any{"describe": map[string]any{"group": d.Group, "state": d.State, "err": errText(d.Err),
			"protocol_type": d.ProtocolType, "members": len(d.Members)}})
		offsets, err := adm.FetchOffsets(ctx, *groupID)
		if err != nil {
			return err
		}
		committed := map[string]map[int32]int64{}
		offsets.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil {
				return
			}
			if committed[o.Topic] == nil {
				committed[o.Topic] = map[int32]int64{}
			}
			committed[o.Topic][o.Partition] = o.At
		})
		emit(map[string]any{"offsets": committed})
	case "end-offsets":
		listed, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return err
		}
		var failed error
		listed.Each(func(o kadm.ListedOffset) {
			if o.Err != nil && failed == nil {
				failed = fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err)
			}
			emit(map[string]any{"topic": o.Topic, "partition": o.Partition, "offset": o.Offset})
		})
		return failed
	default:
		return fmt.Errorf("unknown -op %q", *op)
	}
	return nil
}
