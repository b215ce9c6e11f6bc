//! The host side of the BFS: an R-MAT graph with Graph500's parameters as CSR, and the host
//! BFS every GPU run is checked against.
use sized_readback::testing::pattern::mix;

/// SplitMix64 as a generator: the next output, and the state advanced.
fn splitmix(s: &mut u64) -> u64 {
    let out = mix(*s);
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    out
}

pub(crate) struct Csr {
    pub(crate) n: usize,
    pub(crate) off: Vec<i64>,
    pub(crate) adj: Vec<i32>,
}

pub(crate) fn rmat(scale: u32, edge_factor: u64, seed: u64) -> Csr {
    let n = 1usize << scale;
    let m = n as u64 * edge_factor;
    const CHUNKS: u64 = 64;
    let per = m.div_ceil(CHUNKS);
    let mut edges: Vec<Vec<(u32, u32)>> = Vec::new();
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..CHUNKS)
            .map(|c| {
                sc.spawn(move || {
                    let mut s = seed ^ splitmix(&mut (seed.wrapping_add(c)));
                    let count = per.min(m.saturating_sub(c * per));
                    let (a, b, cc) = (0.57, 0.19, 0.19);
                    (0..count)
                        .map(|_| {
                            let (mut u, mut v) = (0u32, 0u32);
                            for bit in 0..scale {
                                let r =
                                    (splitmix(&mut s) >> 11) as f64 * (1.0 / 9007199254740992.0);
                                let ub = (r >= a + b) as u32;
                                let vb = ((r >= a && r < a + b) || r >= a + b + cc) as u32;
                                u |= ub << bit;
                                v |= vb << bit;
                            }
                            (u, v)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        edges = handles
            .into_iter()
            .map(|h| h.join().expect("generator thread"))
            .collect();
    });
    let mut s = seed;
    let mut perm: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        perm.swap(i, (splitmix(&mut s) % (i as u64 + 1)) as usize);
    }
    let mut off = vec![0i64; n + 1];
    for &(u, v) in edges.iter().flatten() {
        if u != v {
            off[perm[u as usize] as usize + 1] += 1;
            off[perm[v as usize] as usize + 1] += 1;
        }
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut adj = vec![0i32; off[n] as usize];
    let mut at: Vec<i64> = off[..n].to_vec();
    for &(u, v) in edges.iter().flatten() {
        if u != v {
            let (u, v) = (perm[u as usize] as usize, perm[v as usize] as usize);
            adj[at[u] as usize] = v as i32;
            at[u] += 1;
            adj[at[v] as usize] = u as i32;
            at[v] += 1;
        }
    }
    Csr { n, off, adj }
}

pub(crate) fn host_bfs(g: &Csr, root: usize) -> Vec<i32> {
    let mut level = vec![-1i32; g.n];
    let mut q = Vec::with_capacity(g.n);
    level[root] = 0;
    q.push(root);
    let mut h = 0;
    while h < q.len() {
        let u = q[h];
        h += 1;
        for e in g.off[u]..g.off[u + 1] {
            let w = g.adj[e as usize] as usize;
            if level[w] < 0 {
                level[w] = level[u] + 1;
                q.push(w);
            }
        }
    }
    level
}
