from pipeline.staging import task_failure


def test_a_failed_tasks_lumber_error_is_found_in_sparks_message() -> None:
    spark_error = (
        "An error occurred while calling o84.collect.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 1 "
        "times, most recent failure: Lost task 0.0 (TID 0): org.apache.spark.api.python.PythonException: "
        "Traceback (most recent call last):\n"
        '  File "/x/pipeline/fs.py", line 140, in _call\n'
        'RuntimeError: DataTransferError("All nodes failed for write")\n'
        "\nThe above exception was the direct cause of the following exception:\n\n"
        "pipeline.load_errors.FileSystemError: close hdfs://nn:8020/w/a.parquet: RuntimeError: "
        'DataTransferError("All nodes failed for write")\n'
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(x.scala:1)\n"
    )
    assert task_failure(spark_error) == (
        "FileSystemError: close hdfs://nn:8020/w/a.parquet: RuntimeError: "
        'DataTransferError("All nodes failed for write")'
    )
    assert task_failure("java.lang.OutOfMemoryError: Java heap space") is None
