"""Where results live: ``run_folder`` (one run's files, written as they happen), ``checkpoint`` (training state for
--resume), ``loggers`` (metric streams to TensorBoard, MLflow, W&B) and ``results_db`` (the SQLite index over run
folders that reports read)."""
