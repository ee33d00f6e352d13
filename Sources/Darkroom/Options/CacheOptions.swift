import Foundation

/// JSON options of the `cache` stage.
///
/// ```json
/// {"stage": "cache", "store": "disk", "directory": "/var/cache/darkroom", "maxBytes": 2000000000}
/// ```
package struct CacheOptions: StageOptions {
  public var store: String
  public var maxAge: Double?
  public var prefix: String
  public var directory: String?
  public var maxBytes: Int?
  public var maxCount: Int?
  public var table: String?
  public var family: String?
  public var width: Int?
  public var height: Int?
  public var layout: String?

  public static let stores = ["memory", "disk", "table"]

  public static let specs = [
    OptionSpec(
      "store", .choice(CacheOptions.stores), default: "memory",
      "Where values are kept: memory (the process's LRU), disk (a directory shared by processes: fetched bytes and encoded images), table (decoded pixels in a file of fixed-size slots)."
    ),
    OptionSpec(
      "maxAge", .number(min: -CacheOptions.maxAgeLimit, max: CacheOptions.maxAgeLimit),
      "Seconds to keep a value: > 0 overrides the response's headers; 0 or absent uses Cache-Control/Expires; < 0 never keeps it in memory."
    ),
    OptionSpec("prefix", .string, default: "", "Separates otherwise equal keys, so several variants of one source can coexist."),
    OptionSpec(
      "directory", .string,
      "disk, table: the cache directory; relative to the runner's --cache-dir (or the working directory); default .darkroom-cache."
    ),
    OptionSpec("maxBytes", .integer(min: 0), "disk: the most bytes kept (least recently used go first); default 1 GiB."),
    OptionSpec(
      "maxCount", .integer(min: 1),
      "disk: the most entries kept (default 100000); table: the entries of the table (default 1000)."),
    OptionSpec(
      "table", .string,
      "table: the format's name, also the file name (<name>.imagetable); default: the pipeline's size, e.g. table-300x300-rgb8."),
    OptionSpec("family", .string, "table: the format family (variants of the same images)."),
    OptionSpec("width", .integer(min: 1, max: 16384), "table: the widest image an entry holds (required for table)."),
    OptionSpec("height", .integer(min: 1, max: 16384), "table: the tallest image an entry holds (required for table)."),
    OptionSpec(
      "layout", .choice(PixelLayout.allCases.map(\.rawValue)), "table: the pixels: rgb8 (default), rgba8, gray8, grayAlpha8."),
  ]

  static let tableOptions = ["table", "family", "width", "height", "layout"]

  public func problems() -> [OptionProblem] {
    let given: [String: Bool] = [
      "directory": directory != nil, "maxBytes": maxBytes != nil, "maxCount": maxCount != nil, "table": table != nil,
      "family": family != nil, "width": width != nil, "height": height != nil, "layout": layout != nil,
    ]
    let allowed: Set<String> =
      switch store {
      case "disk": ["directory", "maxBytes", "maxCount"]
      case "table": Set(["directory", "maxCount"] + Self.tableOptions)
      default: []
      }
    var problems = given.filter { $0.value && !allowed.contains($0.key) }.keys.sorted().map { option in
      let owner =
        Self.tableOptions.contains(option) ? "the table store" : option == "maxBytes" ? "the disk store" : "disk and table stores"
      return OptionProblem(option: option, "\(option) applies to \(owner), not to the \(store) store")
    }
    if store == "table" {
      if width == nil { problems.append(OptionProblem(option: "width", "a table store needs the width of its entries")) }
      if height == nil { problems.append(OptionProblem(option: "height", "a table store needs the height of its entries")) }
      if width != nil, height != nil, let error = tableFormatError() {
        problems.append(OptionProblem(option: "table", error))
      }
    }
    return problems
  }

  func tableFormat() throws -> ImageTableFormat {
    let layout = PixelLayout(rawValue: self.layout ?? "rgb8") ?? .rgb8
    let width = width ?? 1
    let height = height ?? 1
    return try ImageTableFormat(
      name: table ?? "table-\(width)x\(height)-\(layout.rawValue)", family: family ?? "", width: width, height: height,
      layout: layout, maxCount: maxCount ?? 1000)
  }

  private func tableFormatError() -> String? {
    do {
      _ = try tableFormat()
      return nil
    } catch let error as PipelineError {
      return error.message
    } catch {
      return "\(error)"
    }
  }

  /// The store these options name, opened (once per directory in a process) and kept in the
  /// context's `PipelineResources` for purging.
  func makeStore(in context: StageBuildContext) throws -> any CacheStore {
    if context.confinesFiles, store != "memory", let directory,
      directory.hasPrefix("/") || directory.split(separator: "/").contains("..")
    {
      throw PipelineError(
        .invalidDefinition,
        "a queued pipeline keeps caches inside the workers' --cache-dir: give a relative directory, not \"\(directory.prefix(80))\""
      )
    }
    if context.opensExistingStoresOnly, store != "memory" {
      let folder = context.resolveCacheDirectory(directory)
      var isFolder: ObjCBool = false
      guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
        throw PipelineError(.notFound, "there is no \(store) store at \(folder): nothing has been cached there")
      }
    }
    let opened: any CacheStore & AnyObject
    switch store {
    case "disk" where context.validatingOnly:
      return UnopenedStore(name: "disk", keeps: DiskStore.keepsDescription) { DiskStore.accepts($0) }
    case "table" where context.validatingOnly:
      return UnopenedStore(name: "table", keeps: ImageTableStore.keepsDescription) { $0 == DecodedImage.self }
    case "table":
      opened = try ImageTableStore.open(directory: context.resolveCacheDirectory(directory), format: try tableFormat())
    case "disk":
      opened = try DiskStore.open(
        directory: context.resolveCacheDirectory(directory), maxBytes: maxBytes ?? 1 << 30, maxCount: maxCount ?? 100_000)
    default:
      opened = MemoryStore.shared
    }
    // One open store per directory (or table) in a process: kept once however many stages name it.
    context.resources.register(opened, id: "\(opened.name):\(ObjectIdentifier(opened))")
    return opened
  }

  var duration: Duration? {
    maxAge.map { .milliseconds(Int((min(max($0, -Self.maxAgeLimit), Self.maxAgeLimit) * 1000).rounded())) }
  }

  /// The largest `maxAge` magnitude accepted: 100 years in seconds. (Found by fuzzing: a
  /// `maxAge` of 10^100 trapped converting to milliseconds.)
  public static let maxAgeLimit: Double = 3_153_600_000
}
