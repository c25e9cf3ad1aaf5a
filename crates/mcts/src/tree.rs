//! The search tree: nodes and edges in two flat arenas. A node exists only once its move has been
//! visited; an edge is the move, its prior and the child node's index. A node is 36 bytes and an
//! edge 12, so a tree of V visited nodes with branching B takes about 36·V + 12·B·V bytes.
//! Reusing a subtree copies it into fresh arenas, which frees everything else at once.

use koma_shogi::Move;

pub(crate) const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum NodeState {
    /// Edges exist but the priors are waiting for an evaluation.
    Pending,
    Expanded,
    /// Game over (or treated as such by search); the value is in `terminal_value`.
    Terminal,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    pub(crate) visits: u32,
    /// Visits in flight (selected, not yet backed up).
    pub(crate) virtual_visits: u32,
    /// Sum of backed-up values from the point of view of the player who moved into this node.
    pub(crate) value_sum: f32,
    /// Sum of backed-up draw probabilities (the same for both players).
    pub(crate) draw_sum: f32,
    /// The evaluator's value and draw probability for the side to move here (once expanded):
    /// a Gumbel root needs them for its completed Q, also after tree reuse made this the root.
    pub(crate) net_value: f32,
    pub(crate) net_draw: f32,
    pub(crate) parent: u32,
    pub(crate) first_edge: u32,
    pub(crate) num_edges: u16,
    pub(crate) state: NodeState,
    /// For terminal nodes: −1, 0 or 1 for the side to move at this node.
    pub(crate) terminal_value: i8,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Edge {
    pub(crate) child: u32,
    pub(crate) prior: f32,
    pub(crate) mv: Move,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Tree {
    pub(crate) nodes: Vec<Node>,
    pub(crate) edges: Vec<Edge>,
}

/// Bytes per visited node and per edge, for documentation and `koma bench mcts`.
pub const NODE_BYTES: usize = std::mem::size_of::<Node>();
pub const EDGE_BYTES: usize = std::mem::size_of::<Edge>();

impl Tree {
    pub(crate) const ROOT: u32 = 0;

    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.edges.clear();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Adds a node with edges for `moves` (priors to be filled) and returns its index.
    pub(crate) fn add_node(&mut self, parent: u32, moves: &[Move]) -> u32 {
        let index = self.nodes.len() as u32;
        let first_edge = self.edges.len() as u32;
        self.edges.extend(moves.iter().map(|&mv| Edge { child: NONE, prior: 0.0, mv }));
        self.nodes.push(Node {
            visits: 0,
            virtual_visits: 0,
            value_sum: 0.0,
            draw_sum: 0.0,
            net_value: 0.0,
            net_draw: 0.0,
            parent,
            first_edge,
            num_edges: moves.len() as u16,
            state: NodeState::Pending,
            terminal_value: 0,
        });
        index
    }

    #[inline]
    pub(crate) fn edge_range(&self, node: u32) -> std::ops::Range<usize> {
        let n = &self.nodes[node as usize];
        n.first_edge as usize..n.first_edge as usize + n.num_edges as usize
    }

    /// Keeps only the subtree below `new_root`, which becomes node 0 (breadth-first order).
    pub(crate) fn keep_subtree(&mut self, new_root: u32) {
        let mut new_index = vec![NONE; self.nodes.len()];
        let mut order = vec![new_root];
        new_index[new_root as usize] = 0;
        let mut i = 0;
        while i < order.len() {
            for e in &self.edges[self.edge_range(order[i])] {
                if e.child != NONE {
                    new_index[e.child as usize] = order.len() as u32;
                    order.push(e.child);
                }
            }
            i += 1;
        }
        let mut nodes = Vec::with_capacity(order.len());
        let mut edges = Vec::new();
        for &old in &order {
            let mut node = self.nodes[old as usize];
            node.parent = if old == new_root { NONE } else { new_index[node.parent as usize] };
            let range = self.edge_range(old);
            node.first_edge = edges.len() as u32;
            edges.extend(
                self.edges[range]
                    .iter()
                    .map(|e| Edge { child: if e.child == NONE { NONE } else { new_index[e.child as usize] }, ..*e }),
            );
            nodes.push(node);
        }
        self.nodes = nodes;
        self.edges = edges;
    }
}
