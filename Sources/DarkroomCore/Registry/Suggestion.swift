/// Finds the closest known name to a misspelt one, for "did you mean" hints.
enum Suggestion {
  /// The closest candidate within a small edit distance, if any.
  static func closest(to word: String, in candidates: [String]) -> String? {
    let lower = word.lowercased()
    // Ties go to a candidate that starts with the word ("fil" → "fill", not "fit").
    let scored = candidates.map { ($0, distance(lower, $0.lowercased()), $0.lowercased().hasPrefix(lower) ? 0 : 1) }
    guard let best = scored.min(by: { ($0.1, $0.2) < ($1.1, $1.2) }) else { return nil }
    let limit = max(2, word.count / 3)
    if best.1 <= limit { return best.0 }
    return candidates.first { $0.lowercased().hasPrefix(lower) || lower.hasPrefix($0.lowercased()) }
  }

  /// Levenshtein distance.
  static func distance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
      current[0] = i
      for j in 1...b.count {
        current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
      }
      swap(&previous, &current)
    }
    return previous[b.count]
  }
}
