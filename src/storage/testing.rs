//! Test support: run an async test on a glommio executor registered as shard 0, with a
//! temporary data directory whose IOPOLL probe file is in place (ENVIRONMENT.md).
use std::future::Future;
use std::path::PathBuf;

pub(crate) fn run<F, Fut>(f: F)
where
    F: FnOnce(PathBuf) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    super::dma::write_iopoll_probe(&path).expect("probe");
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            crate::runtime::enter_shard(0);
            super::dma::open_iopoll_probe(&path).await.expect("probe open");
            f(path).await
        })
        .expect("executor")
        .join()
        .expect("join");
    drop(dir);
}
