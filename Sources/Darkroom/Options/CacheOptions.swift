import Foundation

/// JSON options of the `cache` stage.
///
/// ```json
/// {"stage": "cache", "store": "disk", "directory": "/var/cache/darkroom", "maxBytes": 2000000000}
/// ```
public struct CacheOptions: StageOptions {
  public var store: String
  public var maxAge: Double?
  public var prefix: String
  public var directory: String?
  public var maxBytes: Int?
  public var maxCount: Int?

  public static let stores = ["memory", "disk"]

  public static let specs = [
    OptionSpec(
      "store", .choice(CacheOptions.stores), default: "memory",
      "Where values are kept: memory (the process's LRU), disk (a directory shared by processes: fetched bytes and encoded images)."
    ),
    OptionSpec(
      "maxAge", .number(),
      "Seconds to keep a value: > 0 overrides the response's headers; 0 or absent uses Cache-Control/Expires; < 0 never keeps it in memory."
    ),
    OptionSpec("prefix", .string, default: "", "Separates otherwise equal keys, so several variants of one source can coexist."),
    OptionSpec(
      "directory", .string,
      "disk: the cache directory; relative to the runner's --cache-dir (or the working directory); default .darkroom-cache."),
    OptionSpec("maxBytes", .integer(min: 0), "disk: the most bytes kept (least recently used go first); default 1 GiB."),
    OptionSpec("maxCount", .integer(min: 0), "disk: the most entries kept; default 100000."),
  ]

  public func problems() -> [OptionProblem] {
    guard store == "memory" else { return [] }
    return [("directory", directory != nil), ("maxBytes", maxBytes != nil), ("maxCount", maxCount != nil)]
      .filter(\.1)
      .map { OptionProblem(option: $0.0, "\($0.0) applies to the disk store; the memory store is the process's shared LRU") }
  }

  /// The store these options name, opened (once per directory in a process).
  func makeStore(in context: StageBuildContext) throws -> any CacheStore {
    switch store {
    case "disk" where context.validatingOnly:
      return UnopenedStore(name: "disk", keeps: DiskStore.keepsDescription) { $0 is any CacheSerializable.Type }
    case "disk":
      return try DiskStore.open(
        directory: context.resolveCacheDirectory(directory), maxBytes: maxBytes ?? 1 << 30, maxCount: maxCount ?? 100_000)
    default:
      return MemoryStore.shared
    }
  }

  var duration: Duration? { maxAge.map { .milliseconds(Int(($0 * 1000).rounded())) } }
}
