import Foundation

extension Duration {
  /// The duration in milliseconds.
  var milliseconds: Double {
    let parts = components
    return Double(parts.seconds) * 1000 + Double(parts.attoseconds) / 1e15
  }
}
