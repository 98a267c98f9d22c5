//! Training: softmax regression by stochastic gradient descent over the examples' features.

use std::collections::HashMap;

use super::{FastRouter, softmax};

impl FastRouter {
    /// Softmax regression by stochastic gradient descent, classes weighted to count equally.
    /// Trained over dense feature indices, then kept as a map from feature hash to weights.
    pub(super) fn fit(&mut self, samples: &[(Vec<(u64, f32)>, usize)]) {
        let classes = self.classes.len();
        let mut index: HashMap<u64, usize> = HashMap::new();
        let dense: Vec<(Vec<(usize, f32)>, usize)> = samples
            .iter()
            .map(|(features, class)| {
                let features = features
                    .iter()
                    .map(|(feature, value)| {
                        let next = index.len();
                        (*index.entry(*feature).or_insert(next), *value)
                    })
                    .collect();
                (features, *class)
            })
            .collect();

        let mut counts = vec![0usize; classes];
        for (_, class) in &dense {
            counts[*class] += 1;
        }
        let present = counts.iter().filter(|&&n| n > 0).count() as f32;
        let balance: Vec<f32> = counts
            .iter()
            .map(|&n| {
                if n == 0 {
                    0.0
                } else {
                    dense.len() as f32 / (present * n as f32)
                }
            })
            .collect();

        let mut weights = vec![0.0f32; index.len() * classes];
        let mut order: Vec<usize> = (0..dense.len()).collect();
        // A fixed shuffle (a linear congruential generator): the same examples give the same
        // router on every instance.
        let mut seed: u64 = 0x5eed;
        let mut scores = vec![0.0f32; classes];
        for epoch in 0..self.params.epochs {
            for i in (1..order.len()).rev() {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                order.swap(i, (seed >> 33) as usize % (i + 1));
            }
            let rate = self.params.learning_rate / (1.0 + epoch as f32 * 0.1);
            for &i in &order {
                let (features, class) = &dense[i];
                scores.copy_from_slice(&self.bias);
                for (feature, value) in features {
                    let row = &weights[feature * classes..][..classes];
                    for (score, weight) in scores.iter_mut().zip(row) {
                        *score += weight * value;
                    }
                }
                softmax(&mut scores);
                let weight = balance[*class];
                for (c, p) in scores.iter_mut().enumerate() {
                    *p = weight * (*p - if c == *class { 1.0 } else { 0.0 });
                    self.bias[c] -= rate * *p;
                }
                for (feature, value) in features {
                    let row = &mut weights[feature * classes..][..classes];
                    for (w, gradient) in row.iter_mut().zip(&scores) {
                        *w -= rate * (gradient * value + self.params.l2 * *w);
                    }
                }
            }
        }
        self.weights = index
            .into_iter()
            .map(|(feature, i)| (feature, i as u32))
            .collect();
        self.rows = weights;
    }
}
