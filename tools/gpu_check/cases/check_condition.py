"""CheckCondition has no GPU check case."""

NO_GPU_CODE = {
    "CheckCondition": "reads its condition in host memory and passes its "
    "values through",
}


def cases():
    return []
