import Darkroom
import Foundation

extension RunReport {
  /// A report's thumbnail of one output, with what the output file itself is.
  struct Thumbnail: Sendable {
    var webp: ImageBytes
    var width: Int
    var height: Int
    var format: ImageFormat
  }

  /// Encodes the shrunk image as a small WebP and keeps the output file's own size and format
  /// (as its header declared them, before the shrink-on-load).
  struct ThumbnailStage: Stage {
    static let kind = "reportThumbnail"
    var identifier: String { "reportThumbnail(webp,q40)" }

    func process(_ input: DecodedImage, context: StageContext) async throws -> Thumbnail {
      let encoded = try await ImageEncoder(.webp(quality: 40, effort: 2)).process(input, context: context)
      return Thumbnail(webp: encoded.bytes, width: input.sourceWidth, height: input.sourceHeight, format: input.sourceFormat)
    }
  }

  /// Adds a thumbnail to every output: each written file is read back (it is on a disk that may
  /// have changed) and made small by Darkroom's own pipeline through a loader doing `jobs` at
  /// once, within the fetcher's and decoder's limits and a time limit. A file that cannot be read
  /// or decoded gets no thumbnail; nothing else happens. Outputs whose stage did not say their
  /// size or format (a `save` stage's files) get them from the file's header.
  static func addThumbnails(to outputs: inout [Output], jobs: Int) async {
    var configuration = ImageLoader.Configuration()
    configuration.cpuLimit = jobs
    configuration.timeout = .seconds(30)
    let loader = ImageLoader(configuration: configuration)
    let pipeline = Pipeline(name: "report-thumbnail") {
      Fetcher()
      ImageDecoder()
      Resizer(width: thumbnailSide, height: thumbnailSide, mode: .fit)
      ThumbnailStage()
    }
    let paths = outputs.map(\.path)
    let window = max(1, jobs * 2)
    var thumbnails = [Thumbnail?](repeating: nil, count: paths.count)
    await withTaskGroup(of: (Int, Thumbnail?).self) { group in
      var next = 0
      func start() {
        let index = next
        next += 1
        group.addTask {
          guard case .success(let thumbnail) = await loader.load(ImageSource(path: paths[index]), pipeline: pipeline).result
          else { return (index, nil) }
          return (index, thumbnail)
        }
      }
      while next < paths.count, next < window { start() }
      while let (index, thumbnail) = await group.next() {
        thumbnails[index] = thumbnail
        if next < paths.count { start() }
      }
    }
    for index in outputs.indices {
      guard let thumbnail = thumbnails[index] else { continue }
      if thumbnail.webp.count <= maxThumbnailBytes {
        outputs[index].thumbnail = "data:image/webp;base64," + thumbnail.webp.data.base64EncodedString()
      }
      if outputs[index].width == nil || outputs[index].height == nil {
        (outputs[index].width, outputs[index].height) = (thumbnail.width, thumbnail.height)
      }
      if outputs[index].format == nil { outputs[index].format = thumbnail.format.rawValue }
    }
  }
}
