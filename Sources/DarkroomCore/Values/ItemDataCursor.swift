/// Reads an item's data byte by byte as one stream, though it may lie in several ranges of a file
/// (an item's `iloc` extents). Reads past the data give `nil`, never a trap.
struct ItemDataCursor {
  private let bytes: SafeBytes
  private let ranges: [Range<Int>]
  /// The stream's length: the ranges' lengths together.
  let total: Int
  /// Where the next byte is read, from the start of the stream.
  private(set) var position = 0
  private var rangeIndex = 0
  private var rangeStart = 0

  init(bytes: SafeBytes, ranges: [Range<Int>]) {
    self.bytes = bytes
    self.ranges = ranges.filter { !$0.isEmpty }
    total = self.ranges.reduce(0) { $0.addingReportingOverflow($1.count).overflow ? Int.max : $0 + $1.count }
  }

  var atEnd: Bool { position >= total }
  var remaining: Int { max(0, total - position) }

  /// The byte at the position, advancing it; `nil` (and the end) past the data.
  mutating func next() -> UInt8? {
    while rangeIndex < ranges.count, position - rangeStart >= ranges[rangeIndex].count {
      rangeStart += ranges[rangeIndex].count
      rangeIndex += 1
    }
    guard rangeIndex < ranges.count, let byte = bytes.byte(ranges[rangeIndex].lowerBound + position - rangeStart) else {
      position = total
      return nil
    }
    position += 1
    return byte
  }

  /// Up to `count` bytes from the position (fewer at the end).
  mutating func read(_ count: Int) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(max(0, min(count, remaining)))
    while out.count < count, let byte = next() { out.append(byte) }
    return out
  }

  /// Moves forward to `target` (never back, never past the end).
  mutating func skip(to target: Int) { position = min(max(position, target), total) }
}
