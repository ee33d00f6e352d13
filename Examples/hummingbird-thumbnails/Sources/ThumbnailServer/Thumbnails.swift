import Darkroom
import Hummingbird

/// The sizes the server makes, each a pipeline built once at start-up.
let thumbnailSizes = [64, 256, 1024]

/// Fits an image from `root` into a `size`×`size` box and encodes it as WebP. The fetcher reads
/// only files inside `root`: a path that leads out of it (`../secret.jpg`, a symbolic link) fails
/// with `accessDenied`.
func thumbnailPipeline(root: String, size: Int) -> Pipeline<ImageSource, EncodedImage> {
  Pipeline(name: "thumbnail-\(size)") {
    Fetcher(root: root, allowedSchemes: ["file"])
    ImageDecoder()
    Resizer(width: size, height: size, mode: .fit)
    ImageEncoder(.webp(quality: 80))
  }
}

/// The HTTP status that tells a client why its thumbnail failed.
func httpStatus(for error: PipelineError) -> HTTPResponse.Status {
  switch error.code {
  case .notFound: .notFound
  case .accessDenied, .forbiddenDestination, .invalidInput: .forbidden
  case .tooLarge, .imageTooLarge: .contentTooLarge
  case .unsupportedFormat, .corruptImage: .unprocessableContent
  case .timedOut: .gatewayTimeout
  case .cancelled: HTTPResponse.Status(code: 499, reasonPhrase: "Client Closed Request")
  default: .internalServerError
  }
}

/// `GET /thumbnails/{size}/{name}`: the image `name` from `root` as a WebP thumbnail.
func addThumbnailRoute(to router: Router<BasicRequestContext>, loader: ImageLoader, root: String) {
  let pipelines = Dictionary(uniqueKeysWithValues: thumbnailSizes.map { ($0, thumbnailPipeline(root: root, size: $0)) })
  router.get("thumbnails/:size/:name") { request, context -> Response in
    let size = try context.parameters.require("size", as: Int.self)
    guard let pipeline = pipelines[size] else {
      throw HTTPError(.notFound, message: "sizes: \(thumbnailSizes)")
    }
    let name = try context.parameters.require("name")
    let operation = loader.load(ImageSource(root + "/" + name), pipeline: pipeline)
    do {
      // Cancels the task awaiting `value` when the client hangs up, which cancels the operation
      // (unless another request for the same thumbnail still waits for it).
      let image = try await request.body.consumeWithCancellationOnInboundClose { _ in
        try await operation.value
      }
      return Response(
        status: .ok,
        headers: [.contentType: image.format.mimeType],
        body: ResponseBody(byteBuffer: image.bytes.withUnsafeBytes { ByteBuffer(bytes: $0) })
      )
    } catch let error as PipelineError {
      // The code, not the message: messages name paths on the server.
      throw HTTPError(httpStatus(for: error), message: error.code.rawValue)
    }
  }
}
