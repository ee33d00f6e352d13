import Crypto
import Foundation

/// Which input each output file of a batch belongs to, so that two inputs never silently
/// overwrite each other's output.
///
/// A `write` or `save` stage that has claims records every file it writes under its owner (the
/// input's identity and the variant). When a template maps a second input onto a file already
/// written for another one (`a.jpg` and `a.png` under `{name}.{ext}`), the second write fails with
/// `writeFailed`, saying which input has the file, and the first output stays. The same input
/// (and variant) may write its file again. The runner gives one instance to every writer of a run;
/// a long-running program makes one per batch.
///
/// ```swift
/// let claims = OutputClaims()
/// let write = Writer(directory: "out", template: "{name}.{ext}", claims: claims)
/// ```
package final class OutputClaims: Sendable {
  /// Keyed by the path's bytes (two spellings of `é` are two files), each with its owner (one entry
  /// a file written, held for the whole run: kept to two strings).
  private let owners = Protected<[PathKey: String]>([:])

  /// A written file's path as a SHA-256 of its bytes: 32 bytes held inline instead of the path.
  private struct PathKey: Hashable {
    let words: SIMD4<UInt64>
    init(_ path: String) {
      let digest = Array(SHA256.hash(data: Array(path.utf8)))
      func word(_ start: Int) -> UInt64 { digest[start..<start + 8].reduce(0) { $0 << 8 | UInt64($1) } }
      words = SIMD4(word(0), word(8), word(16), word(24))
    }
  }

  public init() {}

  /// Records that `owner` writes `path`; the owner that already has it, when that is another.
  /// Paths and owners are compared byte by byte.
  public func claim(_ path: String, for owner: String) -> String? {
    let key = PathKey(ImageSource.absolute(path))
    return owners.withLock { owners in
      if let existing = owners[key], !existing.utf8.elementsEqual(owner.utf8) { return existing }
      owners[key] = owner
      return nil
    }
  }

  /// How many files are claimed.
  public var count: Int { owners.withLock { $0.count } }

  /// Claims `path` for the run's input and variant, or throws `writeFailed` naming both inputs.
  func claim(_ path: String, source: ImageSource, variant: String?, template: String) throws(PipelineError) {
    let owner = source.requestIdentity + "\u{1F}" + (variant ?? "")
    guard let holder = claim(path, for: owner) else { return }
    // The other input's identity (its bytes outside printable ASCII escaped), shown as typed.
    let other = holder.split(separator: "\u{1F}", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? holder
    let identity = other.components(separatedBy: " headers:").first ?? other
    let plain = identity.hasPrefix("file:") ? String(identity.dropFirst(5)) : identity
    let shown = plain.removingPercentEncoding ?? plain
    throw PipelineError(
      .writeFailed,
      "\(path) was already written in this run for \(ImageSource.redacted(shown)); the template \"\(template)\" gives both "
        + "inputs one file name: add a placeholder that tells them apart ({variant}, {width}, …) or rename one input",
      source: source.description)
  }
}
