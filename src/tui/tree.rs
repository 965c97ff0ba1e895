//! `t` / F5: the process table as a tree of parents and children, as
//! htop draws it. A GPU process whose parent is listed too goes under it;
//! GPU processes that share a parent holding no GPU (torchrun above its
//! ranks, a launcher) go under a header line naming that parent. Siblings
//! keep the table's sort order. Pure: both the key handling (which row is
//! next) and the drawing read the same order from here.

use std::collections::{HashMap, HashSet};

use crate::tui::rows::Row;

/// One line of the table in tree mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// The parent of several GPU processes, itself on no GPU: a heading,
    /// never selected (so never offered a signal).
    Parent { pid: u32, name: Option<String> },
    /// Row `index` of the rows; `last` says, for each level down to it,
    /// whether that branch is its parent's last (the glyphs follow).
    Row { index: usize, last: Vec<bool> },
}

enum Label {
    Parent { pid: u32, name: Option<String> },
    Process(u32),
}

struct Node {
    label: Label,
    children: Vec<usize>,
}

/// The rows (in the table's order) put in tree order: each process right
/// after its parent, the rows of one process together.
pub fn order<'a>(rows: Vec<Row<'a>>) -> Vec<Row<'a>> {
    let at = |e: &Entry| if let Entry::Row { index, .. } = e { Some(rows[*index]) } else { None };
    entries(&rows).iter().filter_map(at).collect()
}

/// The lines to draw, in tree order, for rows in the table's order.
pub fn entries(rows: &[Row]) -> Vec<Entry> {
    let mut by_pid: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        by_pid.entry(r.key.pid).or_default().push(i);
    }
    let (nodes, roots) = forest(rows);
    let mut out = Vec::with_capacity(rows.len());
    let mut seen = HashSet::new();
    for &root in &roots {
        emit(&nodes, root, &mut Vec::new(), &by_pid, &mut seen, &mut out);
    }
    out
}

fn emit(
    nodes: &[Node],
    at: usize,
    last: &mut Vec<bool>,
    by_pid: &HashMap<u32, Vec<usize>>,
    seen: &mut HashSet<usize>,
    out: &mut Vec<Entry>,
) {
    if !seen.insert(at) {
        return;
    }
    match &nodes[at].label {
        Label::Parent { pid, name } => out.push(Entry::Parent { pid: *pid, name: name.clone() }),
        Label::Process(pid) => {
            let rows = by_pid.get(pid).map_or(&[][..], Vec::as_slice);
            out.extend(rows.iter().map(|&index| Entry::Row { index, last: last.clone() }));
        }
    }
    let children = &nodes[at].children;
    for (i, &child) in children.iter().enumerate() {
        last.push(i + 1 == children.len());
        emit(nodes, child, last, by_pid, seen, out);
        last.pop();
    }
}

/// The nodes, and the roots in the order of their first row. A process
/// whose parent chain loops (PIDs reused between readings) is a root.
fn forest(rows: &[Row]) -> (Vec<Node>, Vec<usize>) {
    let mut nodes: Vec<Node> = Vec::new();
    let mut node_of: HashMap<u32, usize> = HashMap::new();
    let mut parents: Vec<(u32, Option<u32>, Option<&str>)> = Vec::new();
    for r in rows {
        if let std::collections::hash_map::Entry::Vacant(v) = node_of.entry(r.key.pid) {
            v.insert(nodes.len());
            nodes.push(Node { label: Label::Process(r.key.pid), children: Vec::new() });
            parents.push((r.key.pid, r.process.parent_pid, r.process.parent_name.as_deref()));
        }
    }
    let mut shared: HashMap<u32, usize> = HashMap::new();
    for &(_, parent, _) in &parents {
        if let Some(p) = parent.filter(|p| launcher_pid(*p) && !node_of.contains_key(p)) {
            *shared.entry(p).or_default() += 1;
        }
    }
    let mut roots = Vec::new();
    let mut headers: HashMap<u32, usize> = HashMap::new();
    for &(pid, parent, name) in &parents {
        let me = node_of[&pid];
        match parent {
            Some(p) if p != pid && node_of.contains_key(&p) && !loops(&parents, &node_of, pid) => {
                nodes[node_of[&p]].children.push(me);
            }
            Some(p) if shared.get(&p).is_some_and(|&n| n >= 2) => {
                let header = *headers.entry(p).or_insert_with(|| {
                    nodes.push(Node {
                        label: Label::Parent { pid: p, name: name.map(str::to_string) },
                        children: Vec::new(),
                    });
                    roots.push(nodes.len() - 1);
                    nodes.len() - 1
                });
                nodes[header].children.push(me);
            }
            _ => roots.push(me),
        }
    }
    (nodes, roots)
}

/// PID 0 and init adopt orphans and start services: sharing them says
/// nothing about belonging together.
fn launcher_pid(pid: u32) -> bool {
    pid > 1
}

/// Whether following parents among the listed processes from `pid` comes
/// back to it.
fn loops(parents: &[(u32, Option<u32>, Option<&str>)], node_of: &HashMap<u32, usize>, pid: u32) -> bool {
    let parent_of = |p: u32| parents.get(*node_of.get(&p)?).and_then(|e| e.1);
    let mut at = parent_of(pid);
    for _ in 0..parents.len() {
        match at {
            Some(p) if p == pid => return true,
            Some(p) if node_of.contains_key(&p) => at = parent_of(p),
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Snapshot;
    use crate::tui::rows::{Sort, build};

    /// torchrun (500, on no GPU) above ranks 10 and 11; 11 started a
    /// helper 12 that has a GPU too; vllm (20) alone under init.
    fn snap() -> Snapshot {
        let proc = |pid: u32, gpu: u32, mem: u64, parent: u32, parent_name: &str| {
            serde_json::json!({
                "pid": pid, "gpus": [{ "index": gpu, "type": "compute", "used_memory": mem }],
                "gpu_memory_total": mem, "name": "python3", "user": "alice", "command": format!("cmd{pid}"),
                "start_time": null, "start_time_unix_ms": null, "parent_pid": parent, "parent_name": parent_name,
                "cpu_percent": null, "host_memory": null, "allocator": null
            })
        };
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "time": "x", "time_unix_ms": 0, "interval_ms": 1000, "collection_ms": 0.0,
            "simulated": false, "host": {}, "driver": {}, "gpus": [], "alerts": [],
            "processes": [
                proc(12, 1, 50, 11, "python3"), proc(10, 0, 100, 500, "torchrun"),
                proc(20, 2, 300, 1, "systemd"), proc(11, 1, 90, 500, "torchrun")
            ],
            "sources": { "nvml": { "ok": true, "error": null }, "host": { "ok": true, "error": null },
                         "probes": { "ok": true, "error": null, "directory": null, "files": 0, "skipped": 0, "last_skipped": null } }
        }))
        .unwrap()
    }

    fn pids(rows: &[Row]) -> Vec<u32> {
        rows.iter().map(|r| r.key.pid).collect()
    }

    #[test]
    fn children_follow_their_parent_and_a_launcher_heads_its_ranks() {
        let s = snap();
        let rows = order(build(&s, None, "", Sort::default()));
        // By GPU memory: vllm (300) first; torchrun's ranks 10 (100) then 11 (90), 11's helper under it.
        assert_eq!(pids(&rows), [20, 10, 11, 12]);
        let entries = entries(&rows);
        assert_eq!(
            entries,
            [
                Entry::Row { index: 0, last: vec![] },
                Entry::Parent { pid: 500, name: Some("torchrun".into()) },
                Entry::Row { index: 1, last: vec![false] },
                Entry::Row { index: 2, last: vec![true] },
                Entry::Row { index: 3, last: vec![true, true] },
            ]
        );
    }

    #[test]
    fn siblings_keep_the_sort_and_a_lone_child_of_an_unlisted_parent_gets_no_header() {
        let s = snap();
        let asc = Sort { descending: false, ..Sort::default() };
        let rows = order(build(&s, None, "", asc));
        assert_eq!(pids(&rows), [11, 12, 10, 20], "rank 11 (90) before rank 10 (100) when ascending");
        // Filtered down to one rank: its parent shares nothing, so no header.
        let one = order(build(&s, None, "cmd10", Sort::default()));
        assert_eq!(entries(&one), [Entry::Row { index: 0, last: vec![] }]);
    }

    #[test]
    fn a_parent_loop_ends_as_roots_not_a_hang() {
        let mut s = snap();
        s.processes[1].parent_pid = Some(11);
        s.processes[3].parent_pid = Some(10);
        let rows = order(build(&s, None, "", Sort::default()));
        let mut got = pids(&rows);
        got.sort_unstable();
        assert_eq!(got, [10, 11, 12, 20], "every row once");
        assert_eq!(entries(&rows).len(), 4);
    }
}
