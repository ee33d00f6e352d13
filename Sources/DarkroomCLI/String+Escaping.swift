extension String {
  /// The string with each scalar that `table` names replaced by its text: one pass, so a
  /// replacement is never replaced again (HTML, `<script>` JSON and Prometheus label escaping).
  func escaping(_ table: [Unicode.Scalar: String]) -> String {
    var result = ""
    result.reserveCapacity(utf8.count)
    for scalar in unicodeScalars {
      if let replacement = table[scalar] { result += replacement } else { result.unicodeScalars.append(scalar) }
    }
    return result
  }
}
